"""`mode=benchmark`: how fast the configured train loader delivers batches, and at what cost."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from hydra.utils import instantiate
from omegaconf import DictConfig
from torch.utils.data import DataLoader

from src.assemble import Components, assemble
from src.data.loaders import endless
from src.outputs import (
    finish_run,
    record_data_values,
    save_resolved_config,
    write_resolved_config,
)
from src.tensorboard_index import link_run
from src.training.batches import DeviceBatch, mover_for
from src.training.prefetch import device_batches, side_stream_for
from src.training.resources import ProcessTreeMonitor
from src.training.step import TrainStep
from src.training.tensorboard import TensorBoardLogger

log = logging.getLogger(__name__)

METRIC_KEYS = (
    "loader/samples_per_s",
    "loader/batches_per_s",
    "loader/first_batch_s",
    "loader/data_wait_frac",
    "loader/cpu_ms_per_sample",
    "loader/peak_rss_mb",
)
COMPUTE = ("none", "normalize", "model")
RSS_EVERY = 10  # batches between memory samples


@dataclass(frozen=True)
class BenchmarkSettings:
    """The `benchmark` config group (see conf/benchmark/default.yaml)."""

    batches: int
    warmup: int
    compute: str

    def __post_init__(self) -> None:
        if self.batches < 1 or self.warmup < 0:
            raise ValueError(
                f"benchmark.batches must be >= 1 and benchmark.warmup >= 0, got "
                f"{self.batches} and {self.warmup}."
            )
        if self.compute not in COMPUTE:
            raise ValueError(f"benchmark.compute={self.compute!r}; expected one of {COMPUTE}.")


def time_loader(
    loader: DataLoader,
    settings: BenchmarkSettings,
    move: Callable[[Iterator[Any]], Iterator[Any]] | None = None,
    step: Callable[[Any], Any] | None = None,
) -> dict[str, float]:
    """Time `settings.batches` batches after `settings.warmup`: `move` turns the loader's
    batches into what `step` (if any) consumes; waits count the loader's own delivery."""
    monitor = ProcessTreeMonitor()
    start = time.perf_counter()
    # per batch the loader delivered: (arrival time, wait, samples); a lookahead (side stream)
    # fetches one batch ahead of the consumer, so the loader's own deliveries are what count
    fetches: list[tuple[float, float, int]] = []

    def fetched() -> Iterator[Any]:
        batches = endless(loader)
        while True:
            t0 = time.perf_counter()
            batch = next(batches)
            now = time.perf_counter()
            fetches.append((now, now - t0, len(batch[1])))
            yield batch

    consumed = fetched() if move is None else move(fetched())
    window_start, window_first = start, 0
    for i in range(settings.warmup + settings.batches):
        if i == settings.warmup:
            window_start, window_first = time.perf_counter(), len(fetches)
        batch = next(consumed)
        if step is not None:
            step(batch)
        if i % RSS_EVERY == 0:
            monitor.sample()
    if torch.cuda.is_available():
        torch.cuda.synchronize()
    elapsed = time.perf_counter() - window_start
    window = fetches[window_first:]
    monitor.sample()
    cpu_s = monitor.cpu_seconds()
    consumed.close()  # stop the workers
    return {
        "loader/samples_per_s": sum(n for _, _, n in window) / elapsed,
        "loader/batches_per_s": len(window) / elapsed,
        "loader/first_batch_s": fetches[0][0] - start,
        "loader/data_wait_frac": sum(w for _, w, _ in window) / elapsed,
        "loader/cpu_ms_per_sample": 1000.0 * cpu_s / sum(n for _, _, n in fetches),
        "loader/peak_rss_mb": monitor.peak_rss_bytes / 2**20,
    }


def device_batches_of(parts: Components) -> Callable[[Iterator[Any]], Iterator[DeviceBatch]]:
    """Batches -> model-ready device batches, as the training loop moves them (side-stream
    lookahead on CUDA with trainer.device_prefetch)."""
    mover = mover_for(parts)
    side = side_stream_for(parts.device, parts.settings.device_prefetch)
    return lambda batches: device_batches(batches, mover, side)


def train_step(parts: Components, optimizer: torch.optim.Optimizer) -> TrainStep:
    """The training loop's own step (forward, the loss group's loss, backward, optimizer step)
    at a constant learning rate, with the model in train mode."""
    parts.model.train()
    constant = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: 1.0)
    return TrainStep(parts.model, parts.criterion, optimizer, constant, parts.precision)


def benchmark(cfg: DictConfig) -> dict[str, float]:
    """Benchmark the train loader as configured; writes metrics.json and TensorBoard."""
    out = Path(cfg.paths.output_dir)
    resolved = save_resolved_config(cfg, out)
    settings: BenchmarkSettings = instantiate(cfg.benchmark)
    parts = assemble(cfg)
    record_data_values(resolved, parts)
    write_resolved_config(resolved, out)  # now with the data's values
    move = None if settings.compute == "none" else device_batches_of(parts)
    step = None
    if settings.compute == "model":
        step = train_step(parts, instantiate(cfg.optimizer)(parts.model.parameters()))
    metrics = time_loader(parts.train_loader, settings, move, step)
    with TensorBoardLogger(out / "tensorboard") as tb:
        link_run(cfg, tb.log_dir)
        tb.scalars(metrics, 0)
        finish_run(out, tb, resolved, metrics, list(metrics))
    return metrics
