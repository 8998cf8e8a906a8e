"""The throughput rows of `make gpu-check` (bench/gpu_check.py): the model's ceiling on batches
already on the device, and the template's ImageFolder pipeline feeding it at each worker count
(loader.num_workers=auto as the engine resolves it) and decode path, eager and compiled. Each
window is timed by engine/src/engine/measure/timing.py and split into stages by the engine's
own trainer.pipeline_timing (engine/src/engine/training/pipeline_timing.py); every setting is
timed once per round, in an order rotated per round."""

from __future__ import annotations

import itertools
import logging
import time
import traceback
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torchvision.transforms import v2

from bench.gpu_model import ceiling_batches, compiled_warm_up, train_step
from engine.core.cpus import main_threads
from engine.data.datasets.imagefolder import ImageFolderDataset
from engine.data.decode_policy import DecodePolicy
from engine.data.loader_settings import LoaderSettings
from engine.data.loaders import endless, make_loader
from engine.data.resolve_loader import resolve_loader_settings
from engine.data.samplers import RandomOrder
from engine.data.seeded import SeededSamples
from engine.data.transforms import Normalizer, TimedCompose
from engine.measure.timing import BatchMeter, Spread, Window, time_window
from engine.training.batches import BatchMover, DeviceBatch
from engine.training.pipeline_timing import PipelineTimes
from engine.training.prefetch import device_batches, side_stream_for
from src.step import TrainStep

MEAN, STD = [0.485, 0.456, 0.406], [0.229, 0.224, 0.225]
STARTED = time.perf_counter()  # the progress lines' clock


@dataclass(frozen=True)
class Sizes:
    images: int  # JPEGs in the ImageFolder
    size: tuple[int, int]  # their width, height
    crop: int  # RandomResizedCrop output side
    batch: int
    workers: tuple[int, ...]  # loader.num_workers of the cpu-decode rows, beside auto
    fixed: int  # loader.num_workers of the cuda-decode row, the compiled fed row, the val check
    warmup: int  # untimed batches per window
    batches: int  # timed batches per window
    repeats: int  # rotated rounds over the settings
    decode: int  # JPEGs decoded per decode window
    blocks: tuple[int, int, int, int] = (3, 4, 6, 3)  # bottleneck blocks per stage: ResNet-50


@dataclass(frozen=True)
class Setting:
    """One row: who decodes (dataset.decode.device; None: the ceiling, no loader), with how
    many workers, whether the model is compiled, and the main process's torch threads."""

    name: str
    threads: int
    decode: str | None = None
    workers: int = 0
    compiled: bool = False


@dataclass(frozen=True)
class Row:
    setting: Setting
    rate: Spread  # images/s
    wait: Spread  # the share of the window waiting for batches
    stages: dict[str, float]  # median pipeline/<stage>_ms over the rounds ({}: no loader)


@dataclass(frozen=True)
class Fed:
    rows: list[Row]
    failed: dict[str, str]  # setting -> the error that stopped its windows
    auto: int  # what loader.num_workers=auto resolved to
    auto_log: str  # the engine's line on that measurement
    auto_s: float
    first_s: float | None  # the first compiled steps' wall seconds; None: not compiled


def say(text: str) -> None:
    """A progress line, flushed at once: a log cut short still tells what was measured."""
    print(f"[gpu-check {time.perf_counter() - STARTED:6.1f} s] {text}", flush=True)


def loader_settings(sizes: Sizes, workers: int | str, pin: bool) -> LoaderSettings:
    """conf/loader/default.yaml's settings at batch `sizes.batch`, `workers` and `pin`."""
    return LoaderSettings(
        batch_size=sizes.batch,
        shuffle=True,
        num_workers=workers,
        collate_fn=None,
        pin_memory=pin,
        drop_last=True,
        prefetch_factor=2,
        persistent_workers=True,
        timeout=300,
        multiprocessing_context=None,
    )


def _dataset(root: Path, sizes: Sizes, decode_device: str) -> SeededSamples:
    """The train split, RandomResizedCrop + flip, decoded by `decode_device`."""
    crop = v2.RandomResizedCrop(sizes.crop, antialias=True)
    pipeline = TimedCompose([crop, v2.RandomHorizontalFlip()])  # as Pipelines.train: timed
    return SeededSamples(
        ImageFolderDataset(str(root), "train", pipeline, decode=DecodePolicy(device=decode_device)),
        0,
    )


class _Kept(logging.Handler):
    """Keeps the messages of the logger it is added to."""

    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


def resolve_auto(dataset: SeededSamples, sizes: Sizes, cuda: bool) -> tuple[int, str, float]:
    """loader.num_workers=auto as a run resolves it (engine/data/resolve_loader.py, which times
    the loader alone at 0, 1, 2, 4, ... workers up to the usable cores: engine/data/
    autotune.py): the count, the engine's logged line on its measurement, and its seconds."""
    log, kept = logging.getLogger("engine.data.autotune"), _Kept()
    level = log.level
    log.addHandler(kept)
    log.setLevel(logging.INFO)
    start = time.perf_counter()
    try:
        settings = resolve_loader_settings(
            loader_settings(sizes, "auto", True), dataset, lambda d: RandomOrder(d, 0), cuda
        )
    finally:
        log.removeHandler(kept)
        log.setLevel(level)
    workers = int(settings.num_workers)  # type: ignore[arg-type]
    return workers, " ".join(kept.messages), time.perf_counter() - start


def _settled(device: torch.device, then: Callable[[], Any] | None = None) -> Callable[[], None]:
    """What a window does as it opens: wait for the warm-up's GPU work (the host runs steps
    ahead of the GPU, which would count queued warm-up steps in the window), then `then`."""

    def opened() -> None:
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        if then is not None:
            then()

    return opened


def _ceiling(
    ready: list[DeviceBatch], sizes: Sizes, device: torch.device, step: Callable[[Any], Any]
) -> Window:
    """One window of the model alone, cycling `ready` batches (no loader, no copy)."""
    return time_window(
        BatchMeter(),
        lambda: itertools.cycle(ready),
        sizes.warmup,
        sizes.batches,
        step=step,
        opened=_settled(device),
    )


def _fed(
    setting: Setting,
    dataset: SeededSamples,
    sizes: Sizes,
    device: torch.device,
    step: Callable[[Any], Any],
) -> tuple[Window, dict[str, float]]:
    """One window of the loop's path, as mode=benchmark times it: make_loader with stage times,
    the BatchMover, the side-stream lookahead (trainer.device_prefetch) and the step, with
    pinning; its window and its pipeline/<stage>_ms (the warm-up left out)."""
    pin = loader_settings(sizes, setting.workers, True)
    settings, _ = pin.applicable(device.type == "cuda")  # pinning is unset without CUDA
    loader = make_loader(dataset, settings, RandomOrder(dataset, 0), True, time_stages=True)
    mover = BatchMover(device, Normalizer(MEAN, STD), True, setting.workers > 0)
    side, pipeline = side_stream_for(device, True), PipelineTimes(device)

    def consume(delivered: Iterator[Any]) -> Iterator[DeviceBatch]:
        moved = device_batches(delivered, pipeline.mover(mover), side)
        return pipeline.stepping(moved, 0)

    window = time_window(
        BatchMeter(),
        lambda: pipeline.arrivals(endless(loader)),
        sizes.warmup,
        sizes.batches,
        consume,
        step,
        _settled(device, pipeline.take),
    )  # the loader and its persistent workers go when this returns
    return window, pipeline.take().metrics()


def _grid(
    sizes: Sizes, device: torch.device, auto: int, compiling: bool, compiled: int
) -> list[Setting]:
    """The rows, in table order: the ceilings, the cpu-decode worker counts (auto's named),
    the batched decode, the compiled fed row. Each runs on the main-process threads a run
    sets (the cores the workers leave: engine/core/cpus.py); the compiled rows all on the
    compiled fed row's, `compiled`, which the compile saw (another count compiles anew)."""
    grid = [Setting("ceiling: the model alone, on batches already on the device", main_threads(0))]
    if compiling:
        grid.append(Setting("ceiling, trainer.compile=default", compiled, compiled=True))
    for n in sorted({*sizes.workers, auto}):
        name = f"dataset.decode.device=cpu, loader.num_workers={f'auto (={n})' if n == auto else n}"
        grid.append(Setting(name, main_threads(n), "cpu", n))
    other = "cuda" if device.type == "cuda" else "main"
    name = f"dataset.decode.device={other}, loader.num_workers={sizes.fixed}"
    grid.append(Setting(name, compiled, other, sizes.fixed))
    if compiling:
        name = f"dataset.decode.device=cpu, loader.num_workers={sizes.fixed}"
        grid.append(Setting(f"{name}, trainer.compile=default", compiled, "cpu", sizes.fixed, True))
    return grid


def feeding(root: Path, sizes: Sizes, device: torch.device, compiling: bool) -> Fed:
    """Every row of the throughput table: `sizes.repeats` rounds over the settings (see
    `_grid`). `compiling`: also the compiled model, compiled first on the ceiling's batches;
    an error in one setting's window leaves its row out (named in `failed`), not the rest."""
    cuda = device.type == "cuda"
    datasets = {name: _dataset(root, sizes, name) for name in ("cpu", "cuda" if cuda else "main")}
    classes = len(datasets["cpu"].classes)
    say("loader.num_workers=auto: the engine times worker counts (the loader alone)")
    auto, auto_log, auto_s = resolve_auto(datasets["cpu"], sizes, cuda)
    say(f"loader.num_workers=auto resolved to {auto} in {auto_s:.1f} s: {auto_log}")
    mover = BatchMover(device, Normalizer(MEAN, STD), True)
    ready = ceiling_batches(mover, sizes.batch, sizes.crop, classes)
    steps: dict[bool, TrainStep] = {False: train_step(device, classes, sizes.blocks)}
    for batch in ready:  # the eager model's first-touch costs, out of the first round
        steps[False](batch)
    failed: dict[str, str] = {}  # one setting's error costs its row, not the device run
    first_s: float | None = None
    threads, compiled = torch.get_num_threads(), main_threads(sizes.fixed)
    try:
        if compiling:
            steps[True] = train_step(device, classes, sizes.blocks)
            say("torch.compile (trainer.compile=default): the first steps compile")
            try:
                first_s = compiled_warm_up(steps[True], ready[0], sizes.warmup, compiled)
            except Exception as err:  # the other rows still run
                traceback.print_exc()
                failed["torch.compile (trainer.compile=default)"] = _error(err)
                compiling = False
            else:
                say(f"compiled: the first {sizes.warmup} steps took {first_s:.1f} s")
        grid = _grid(sizes, device, auto, compiling, compiled)
        measured: dict[Setting, list[tuple[Window, dict[str, float]]]] = {s: [] for s in grid}
        for round_ in range(sizes.repeats):
            shift = round_ % len(grid)
            for setting in grid[shift:] + grid[:shift]:
                if setting.name in failed:
                    continue
                torch.set_num_threads(setting.threads)
                step = steps[setting.compiled]
                try:
                    if setting.decode is None:
                        result = _ceiling(ready, sizes, device, step), {}
                    else:
                        result = _fed(setting, datasets[setting.decode], sizes, device, step)
                except Exception as err:  # reported in its row and the log
                    traceback.print_exc()
                    failed[setting.name] = _error(err)
                    continue
                measured[setting].append(result)
                say(
                    f"round {round_ + 1}/{sizes.repeats}, {setting.name}: "
                    f"{result[0].samples_per_s:.0f} images/s, "
                    f"data wait {100 * result[0].data_wait_frac:.1f}%"
                )
    finally:
        torch.set_num_threads(threads)
    rows = [_row(setting, results) for setting, results in measured.items() if results]
    return Fed(rows, failed, auto, auto_log, auto_s, first_s)


def _error(err: Exception) -> str:
    """An error in one line: its type and its message's first line."""
    return f"{type(err).__name__}: {(str(err).splitlines() or [''])[0]}"


def _row(setting: Setting, results: list[tuple[Window, dict[str, float]]]) -> Row:
    """A setting's rounds: the spread of its rates and waits, the median of each stage."""
    stages = [s for _, s in results]
    keys = set.intersection(*(set(s) for s in stages))
    return Row(
        setting,
        Spread.of(w.samples_per_s for w, _ in results),
        Spread.of(w.data_wait_frac for w, _ in results),
        {key: Spread.of(s[key] for s in stages).median for key in sorted(keys)},
    )
