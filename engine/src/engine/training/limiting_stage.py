"""Which stage of the input pipeline keeps the model waiting, and what would lift it: read from
an epoch's pipeline/<stage>_ms (engine/training/pipeline_timing.py). The rules, in SPDL's
terms (per-stage time against the headroom): the main process waits for a batch (`wait`) or
copies it (`h2d`) instead of stepping; when the copy dominates, the copy is the limit, else
the workers' slowest stage per sample is."""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch.utils.data import DataLoader

from engine.core.cpus import available_cpus
from engine.measure.stages import WORKER_STAGES, stage_key


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


def _workers_fixes(loader: DataLoader, cores: int) -> list[str]:
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
            *_workers_fixes(loader, cores),
        ]
    if stage == "decode":
        return [*_workers_fixes(loader, cores), cache]
    if stage == "transform":
        fixes = []
        if steps:
            name, ms = next(iter(steps.items()))
            share = 100 * ms / per_sample if per_sample else 0.0
            fixes.append(
                f"lighten or drop {name} ({_ms(ms)} ms/img, {share:.0f}% of a sample's time), "
                "or apply it to the batch on the device"
            )
        return [*fixes, *_workers_fixes(loader, cores), cache]
    return [  # collate
        "a lighter loader.collate_fn (stack tensors; no Python work per sample), or a "
        "dataset that returns whole batches (returns_batches, as dataset=tensor)",
        *_workers_fixes(loader, cores),
    ]


def limiting_stage(
    stages: dict[str, float], steps: dict[str, float], loader: DataLoader
) -> Limit | None:
    """The stage that keeps the model from stepping, from an epoch's pipeline/<stage>_ms and
    its transform steps' ms per sample (slowest first); None without stage times."""
    wait, h2d = stages.get(stage_key("wait")), stages.get(stage_key("h2d"))
    if wait is None or h2d is None:
        return None
    batch_ms = wait + h2d + stages[stage_key("step")]
    idle = (wait + h2d) / batch_ms if batch_ms > 0 else 0.0
    if h2d > wait:
        unpinned = not loader.pin_memory and torch.cuda.is_available()  # pinning helps CUDA
        pinned = "set loader.pin_memory=true (asynchronous copies " if unpinned else ""
        return Limit(
            "h2d",
            f"h2d {_ms(h2d)} ms of {_ms(batch_ms)} per batch in the main process",
            [
                *([pinned + "from page-locked memory)"] if pinned else []),
                "send uint8 batches (no float conversion in the transforms): 4x fewer bytes "
                "to copy, normalised on the device (transforms.mean/std)",
            ],
            idle,
        )
    per_stage = {s: stages[stage_key(s)] for s in WORKER_STAGES if stage_key(s) in stages}
    if not per_stage:
        return None
    stage = max(per_stage, key=per_stage.__getitem__)
    per_sample = sum(per_stage.values())
    where = "per worker" if loader.num_workers else "in the main process (loader.num_workers=0)"
    return Limit(
        stage,
        f"{stage} {_ms(per_stage[stage])} ms/img of {_ms(per_sample)} {where}",
        _fixes(stage, loader, steps, per_sample),
        idle,
    )
