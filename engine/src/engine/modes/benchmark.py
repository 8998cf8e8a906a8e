"""`mode=benchmark`: how fast the configured train loader delivers batches, and at what cost."""

from __future__ import annotations

import inspect
import logging
import statistics
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from hydra.utils import instantiate
from omegaconf import DictConfig
from torch.utils.data import DataLoader

from engine.data.loaders import endless
from engine.measure.resources import ProcessTreeMonitor
from engine.measure.timing import BatchMeter, Spread, time_window
from engine.runs.outputs import (
    finish_run,
    record_data_values,
    save_resolved_config,
    write_resolved_config,
)
from engine.runs.tensorboard import TensorBoardLogger
from engine.runs.tensorboard_index import link_run
from engine.training.assemble import Components, assemble
from engine.training.batches import DeviceBatch, mover_for
from engine.training.optimization import build_optimizer
from engine.training.pipeline_timing import PipelineTimes, stage_table
from engine.training.prefetch import device_batches, side_stream_for

log = logging.getLogger(__name__)

COMPUTE = ("none", "normalize", "model")


@dataclass(frozen=True)
class BenchmarkSettings:
    """The `benchmark` config group (see engine/conf/benchmark/default.yaml)."""

    batches: int
    warmup: int
    compute: str
    repeats: int = 3

    def __post_init__(self) -> None:
        if self.batches < 1 or self.warmup < 0 or self.repeats < 1:
            raise ValueError(
                f"benchmark.batches and benchmark.repeats must be >= 1 and benchmark.warmup "
                f">= 0, got {self.batches}, {self.repeats} and {self.warmup}."
            )
        if self.compute not in COMPUTE:
            raise ValueError(f"benchmark.compute={self.compute!r}; expected one of {COMPUTE}.")


def time_loader(
    loader: DataLoader,
    settings: BenchmarkSettings,
    move: Callable[[Iterator[Any]], Iterator[Any]] | None = None,
    step: Callable[[Any], Any] | None = None,
    clock: Callable[[], float] = time.perf_counter,
    pipeline: PipelineTimes | None = None,
) -> dict[str, float]:
    """`settings.repeats` windows of `settings.batches` batches after `settings.warmup`, each
    from a new iterator over `loader`: `move` turns the loader's batches into what `step` (if
    any) consumes; waits count the loader's own deliveries (engine/measure/timing.py). Reports the
    median of each rate over the repeats, the range of samples/s, the first repeat's
    first batch (cold start-up) and the largest memory peak; with `pipeline` (the stage times
    the loader's batches carry, `move` timed by it), the median of each pipeline/<stage>_ms
    over the windows."""

    def batches() -> Iterator[Any]:
        delivered = endless(loader)
        return delivered if pipeline is None else pipeline.arrivals(delivered)

    def consume(delivered: Iterator[Any]) -> Iterator[Any]:
        moved = move(delivered) if move is not None else delivered
        return moved if pipeline is None else pipeline.stepping(moved, 0)

    windows, stages = [], []
    for _ in range(settings.repeats):
        meter = BatchMeter(clock, ProcessTreeMonitor)
        opened = pipeline.take if pipeline is not None else None  # the warm-up left out
        windows.append(
            time_window(meter, batches, settings.warmup, settings.batches, consume, step, opened)
        )
        if pipeline is not None:
            stages.append(pipeline.take().metrics())
    rates = Spread.of(w.samples_per_s for w in windows)
    medians = (
        {key: statistics.median(s[key] for s in stages) for key in stages[0]} if stages else {}
    )
    return {
        "loader/samples_per_s": rates.median,
        "loader/samples_per_s_min": rates.low,
        "loader/samples_per_s_max": rates.high,
        "loader/batches_per_s": statistics.median(w.batches_per_s for w in windows),
        "loader/first_batch_s": windows[0].first_batch_s,
        "loader/data_wait_frac": statistics.median(w.data_wait_frac for w in windows),
        "loader/cpu_ms_per_sample": statistics.median(w.cpu_ms_per_sample for w in windows),
        "loader/peak_rss_mb": max(w.peak_rss_bytes for w in windows) / 2**20,
    } | medians


def device_batches_of(
    parts: Components, pipeline: PipelineTimes | None = None
) -> Callable[[Iterator[Any]], Iterator[DeviceBatch]]:
    """Batches -> model-ready device batches, as the training loop moves them (side-stream
    lookahead on CUDA with trainer.device_prefetch); each move timed by `pipeline`."""
    mover = mover_for(parts) if pipeline is None else pipeline.mover(mover_for(parts))
    side = side_stream_for(parts.device, parts.settings.device_prefetch)
    return lambda batches: device_batches(batches, mover, side)


def train_step(parts: Components, optimizer: torch.optim.Optimizer, step: type) -> Callable:
    """The training loop's own step (`step`, the template's TrainStep: forward, the loss group's
    loss, backward, optimizer step) at a constant learning rate, with the model in train mode:
    built by position, `step(model, criterion, optimizer, scheduler, precision)`, and called
    on each batch; a class that takes other parameters first is one TypeError line naming it
    (src/step.py's TrainStep keeps those five first)."""
    parts.model.train()
    constant = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda _: 1.0)
    built = (parts.model, parts.criterion, optimizer, constant, parts.precision)
    name = f"{step.__module__}.{step.__qualname__}"
    contract = (
        "benchmark.compute=model builds the train step as TrainStep(model, criterion, "
        "optimizer, scheduler, precision) and calls it on each batch (forward, backward, "
        "optimizer step)"
    )
    takes = inspect.signature(step).replace(return_annotation=inspect.Signature.empty)
    try:
        takes.bind(*built)
    except TypeError as err:
        raise TypeError(
            f"{contract}: {name}{takes} does not take that ({err}); keep those five parameters "
            "first, or set benchmark.compute=none."
        ) from None
    return step(*built)  # callable: engine.app.run checked the class (engine.api.Step)


def benchmark(cfg: DictConfig, step: type) -> dict[str, float]:
    """Benchmark the train loader as configured (with compute=model, through the template's
    `step` class); writes metrics.json and TensorBoard."""
    out = Path(cfg.paths.output_dir)
    resolved = save_resolved_config(cfg, out)
    settings: BenchmarkSettings = instantiate(cfg.benchmark)
    parts = assemble(cfg)
    record_data_values(resolved, parts)
    write_resolved_config(resolved, out)  # now with the data's values
    pipeline = PipelineTimes(parts.device) if parts.settings.pipeline_timing else None
    move = None if settings.compute == "none" else device_batches_of(parts, pipeline)
    consume = None
    if settings.compute == "model":
        optimizer = build_optimizer(cfg.optimizer, parts.model)
        consume = train_step(parts, optimizer, step)
    metrics = time_loader(parts.train_loader, settings, move, consume, pipeline=pipeline)
    if pipeline is not None:
        log.info(
            "Where each batch's time went (medians over benchmark.repeats; the step is "
            "benchmark.compute=%s):\n%s",
            settings.compute,
            stage_table(
                metrics, pipeline.epoch().transform_steps(), parts.train_loader.num_workers
            ),
        )
    with TensorBoardLogger(out / "tensorboard") as tb:
        link_run(cfg, tb.log_dir)
        tb.scalars(metrics, 0)
        finish_run(out, tb, resolved, metrics, list(metrics))
    return metrics
