"""Which stage of the input pipeline keeps the model waiting, and what would lift it: read from
an epoch's stage times (engine/training/pipeline_timing.py). The rules, in SPDL's terms
(per-stage time against the headroom): the main process waits for a batch (`wait`) or copies
it (`h2d`) instead of stepping. When the copy takes longer than the wait (or, copied beside
the step on a side stream, longer than the step) it is the limit. When the wait is far more
than the workers' timed stages can explain, the time goes to something untimed (start-up,
a read the dataset does not mark, the queue), said as such, unless the main process's own
batched decode and crops (dataset.decode.device=main|cuda) fill it. Else the workers' slowest
stage per sample is."""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch.utils.data import DataLoader

from engine.core.cpus import available_cpus
from engine.data.batch_stages import Loader
from engine.measure.stages import WORKER_STAGES, stage_key
from engine.training.pipeline_timing import StageMeans


@dataclass(frozen=True)
class Limit:
    """The stage that limits an epoch: `line` for the epoch line, `fixes` what would lift it."""

    stage: str
    line: str
    fixes: list[str]
    idle_frac: float  # the share of a batch's time in the main process not spent stepping


def _ms(value: float) -> str:
    """Milliseconds to the digits that mean something: 0.17, 3.1, 41."""
    return f"{value:.2f}" if value < 1 else f"{value:.1f}" if value < 100 else f"{value:.0f}"


def workers_fixes(loader: DataLoader, cores: int) -> list[str]:
    """More loader workers, while there are fewer than `cores` (the data-wait hint's too)."""
    workers = loader.num_workers
    if workers >= cores:
        return []
    return [
        f"raise loader.num_workers (now {workers}) toward the {cores} usable cores, or set "
        "loader.num_workers=auto to measure"
    ]


def _fixes(stage: str, loader: DataLoader, steps: dict[str, float], per_sample: float) -> list[str]:
    """What lifts a worker `stage` (its share of the `per_sample` ms of a sample)."""
    cores = available_cpus()
    cache = (
        "store the images pre-resized near the training size, decoded once (make cache, then "
        "dataset=cache), or pre-resize smaller (cache.short_side)"
    )
    if stage == "read":
        return [
            "copy the data to a local disk (node-local SSD or /dev/shm) instead of a network "
            "or slow one",
            "pack it into shards read in sequence (make shards, then dataset=iterable)",
            *workers_fixes(loader, cores),
        ]
    if stage == "decode":
        return [*workers_fixes(loader, cores), cache]
    if stage == "transform":
        fixes = []
        if steps:
            name, ms = next(iter(steps.items()))
            share = 100 * ms / per_sample if per_sample else 0.0
            fixes.append(
                f"lighten or drop {name} ({_ms(ms)} ms/img, {share:.0f}% of a sample's time), "
                "or apply it to the batch on the device"
            )
        return [*fixes, *workers_fixes(loader, cores), cache]
    return [  # collate
        "a lighter loader.collate_fn (stack tensors; no Python work per sample), or a "
        "dataset that returns whole batches (returns_batches, as dataset=tensor)",
        *workers_fixes(loader, cores),
    ]


def _copy_fixes(loader: DataLoader, overlapped: bool, uint8: bool) -> list[str]:
    """What lifts a copy to the device (with the normalisation there) that limits."""
    fixes = []
    if not loader.pin_memory and torch.cuda.is_available():  # pinning helps CUDA copies only
        fixes.append("set loader.pin_memory=true (asynchronous copies from page-locked memory)")
    if torch.cuda.is_available() and not overlapped:
        fixes.append("set trainer.device_prefetch=true (the next batch's copy beside the step)")
    if uint8:
        fixes.append(
            "the batches already come as uint8: the time is their normalisation into float "
            "inputs, in the main process; it shrinks with the input size (the transforms' "
            "size), and on a GPU it runs on the device"
        )
    else:
        fixes.append(
            "send uint8 batches (no float conversion in the transforms): 4x fewer bytes "
            "to copy, normalised on the device (transforms.mean/std)"
        )
    return fixes


def _untimed_fixes(loader: DataLoader) -> list[str]:
    """Where a wait the timed stages do not explain usually goes."""
    fixes = []
    if loader.num_workers and not loader.persistent_workers:
        fixes.append(
            "worker start-up, every epoch: set loader.persistent_workers=true (a short epoch "
            "is mostly start-up: judge a longer one)"
        )
    elif loader.num_workers:
        fixes.append("worker start-up: the first epoch pays it; judge a longer run")
    return [
        *fixes,
        "a read the dataset does not time: mark its reader with engine.api.timed_stage('read') "
        "(a stream of your own times only its transforms)",
        "the queue from the workers: fewer bytes a batch (uint8, images pre-resized)",
        "processes beside the training on the same cores (loader.num_workers plus "
        "trainer.num_threads past the usable cores)",
    ]


def _batched_limit(loader: DataLoader, wait: float, idle: float) -> Limit | None:
    """The main process's batched decode and crops (dataset.decode.device=main|cuda,
    engine/data/encoded.py) when they take most of the wait for a batch; None otherwise."""
    decoder = loader.decoder if isinstance(loader, Loader) else None
    if decoder is None:
        return None
    batches, seconds = decoder.take_seconds()
    if not batches:
        return None
    decode, crops = (1000 * seconds[key] / batches for key in ("decode", "transform"))
    if decode + crops < 0.5 * wait:
        return None
    on_gpu = decoder.device.type == "cuda"
    line = (
        f"the batched decode {_ms(decode)} ms and crops {_ms(crops)} ms a batch in the main "
        f"process{' (on the GPU)' if on_gpu else ''}, of a {_ms(wait)} ms wait"
    )
    fixes = (
        []
        if on_gpu or not torch.cuda.is_available()
        else ["decode on the GPU: dataset.decode.device=cuda (batched nvJPEG and crops there)"]
    )
    fixes.append(
        "decode in the workers, in parallel: dataset.decode.device=cpu with loader.num_workers "
        f"toward the {available_cpus()} usable cores (or loader.num_workers=auto to measure)"
    )
    return Limit("batched decode", line, fixes, idle)


def limiting_stage(
    means: StageMeans, loader: DataLoader, overlapped: bool, uint8: bool
) -> Limit | None:
    """The stage that keeps the model from stepping, from an epoch's stage `means`; None
    without stage times. `overlapped`: the copy runs on a side stream beside the step
    (CUDA, trainer.device_prefetch), so it limits only when longer than the step; else the
    main process copies between steps. `uint8`: the batches came as uint8."""
    stages = means.metrics()
    keys = [stage_key(s) for s in ("wait", "h2d", "step")]
    if not all(key in stages for key in keys):
        return None
    wait, h2d, step = (stages[key] for key in keys)
    serial = 0.0 if overlapped else h2d  # the copy's share of the main process's time
    batch_ms = wait + serial + step
    idle = (wait + serial) / batch_ms if batch_ms > 0 else 0.0
    if (h2d > step) if overlapped else (h2d > wait):
        line = (
            f"h2d {_ms(h2d)} ms of {_ms(batch_ms)} per batch in the main process, "
            f"{100 * idle:.0f}% of it not stepping"
        )
        return Limit("h2d", line, _copy_fixes(loader, overlapped, uint8), idle)
    batched = _batched_limit(loader, wait, idle)
    if batched is not None:
        return batched
    per_stage = {s: stages[stage_key(s)] for s in WORKER_STAGES if stage_key(s) in stages}
    if not per_stage:
        return None
    per_sample = sum(per_stage.values())
    workers = loader.num_workers
    # the timed work of one batch, shared by the workers: the wait it can explain
    explained = per_sample * means.samples / max(1, means.worker_batches) / max(1, workers)
    if wait > 2 * explained + 1.0:
        line = (
            f"waited {_ms(wait)} ms a batch, and the timed stages take {_ms(explained)} ms a "
            "batch " + ("per worker" if workers else "in the main process")
        )
        return Limit("untimed", line, _untimed_fixes(loader), idle)
    stage = max(per_stage, key=per_stage.__getitem__)
    where = "per worker" if workers else "in the main process (loader.num_workers=0)"
    return Limit(
        stage,
        f"{stage} {_ms(per_stage[stage])} ms/img of {_ms(per_sample)} {where}",
        _fixes(stage, loader, means.transform_steps(), per_sample),
        idle,
    )
