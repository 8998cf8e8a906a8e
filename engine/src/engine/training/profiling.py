"""`trainer.profile`: a torch.profiler trace of the first train batches (debug=profile)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

import torch
from torch.profiler import ProfilerActivity, profile, schedule, tensorboard_trace_handler

WAIT, WARMUP, ACTIVE = 1, 2, 5  # batches skipped, warmed up, then recorded


@contextlib.contextmanager
def batch_profiler(enabled: bool, trace_dir: Path) -> Iterator[profile | None]:
    """A profiler to `.step()` once per batch, writing one trace into `trace_dir`; None if off.

    The trace (`*.pt.trace.json`) opens in TensorBoard's profiler plugin (torch-tb-profiler),
    Perfetto or chrome://tracing.
    """
    if not enabled:
        yield None
        return
    activities = [ProfilerActivity.CPU]
    if torch.cuda.is_available():
        activities.append(ProfilerActivity.CUDA)
    with profile(
        activities=activities,
        schedule=schedule(wait=WAIT, warmup=WARMUP, active=ACTIVE, repeat=1),
        on_trace_ready=tensorboard_trace_handler(str(trace_dir)),
        record_shapes=True,
        profile_memory=True,
    ) as prof:
        yield prof
