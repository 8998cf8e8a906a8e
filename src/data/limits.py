"""Host limits loader workers run into: /dev/shm size and open files (`loader.sharing_strategy`).

Workers hand each batch to the main process through shared memory (/dev/shm on Linux). With
torch's default `file_descriptor` strategy every shared tensor in flight also holds an open
file. Both limits are checked before the first batch, and a warning says what to change.
"""

from __future__ import annotations

import logging
import multiprocessing
import os
from dataclasses import replace
from typing import Any

import numpy as np
import torch
import torch.multiprocessing as torch_mp
from torch.utils.data import Dataset

from src.data.loaders import LoaderSettings
from src.utils.resolvers import available_cpus

log = logging.getLogger(__name__)

TORCH_DEFAULT_STRATEGY = torch_mp.get_sharing_strategy()  # before anyone changed it
SHM_PATH = "/dev/shm"
SHM_HEADROOM = 2.0  # x the in-flight batches: collation copies, pinning, allocator slack
FD_HEADROOM = 4  # x the tensors in flight: batches the main process still holds
FD_BASE = 256  # files the process keeps open anyway (libraries, logs, dataset files)
MIB = 2**20
WORKERS_PER_CPU = 4  # above this many workers per usable core, more only cost memory and start-up


def cap_workers(settings: LoaderSettings) -> LoaderSettings:
    """`settings` with `num_workers` capped at WORKERS_PER_CPU x the usable cores, with a
    warning: each worker is a process with its own memory, and a thousand of them never
    start in reasonable time."""
    cap = WORKERS_PER_CPU * available_cpus()
    if settings.num_workers == "auto" or settings.num_workers <= cap:
        return settings
    log.warning(
        "loader.num_workers=%d is far above the %d usable CPU cores: capped at %d (%d per core; "
        "more workers only add memory and start-up time).",
        settings.num_workers,
        available_cpus(),
        cap,
        WORKERS_PER_CPU,
    )
    return replace(settings, num_workers=cap)


def apply_sharing_strategy(settings: LoaderSettings) -> str:
    """Set `loader.sharing_strategy` (null restores torch's default); returns the one in force."""
    strategy = settings.sharing_strategy or TORCH_DEFAULT_STRATEGY
    available = sorted(torch_mp.get_all_sharing_strategies())
    if strategy not in available:
        raise ValueError(
            f"loader.sharing_strategy={strategy!r} is not available on this platform: "
            f"use one of {available} or null."
        )
    torch_mp.set_sharing_strategy(strategy)
    return strategy


def sample_size(sample: Any) -> tuple[int, int]:
    """(bytes, tensors) of one sample once collated: tensors and arrays by size, numbers as
    one 8-byte tensor each; nested tuples, lists and dicts are walked."""
    if isinstance(sample, torch.Tensor):
        return sample.numel() * sample.element_size(), 1
    if isinstance(sample, np.ndarray):
        return int(sample.nbytes), 1
    if isinstance(sample, (int, float)):
        return 8, 1
    if isinstance(sample, dict):
        sample = list(sample.values())
    if isinstance(sample, (tuple, list)):
        sizes = [sample_size(part) for part in sample]
        return sum(b for b, _ in sizes), sum(n for _, n in sizes)
    return 0, 0


def shm_free_bytes() -> int | None:
    """Free bytes in /dev/shm; None where it does not exist (macOS, Windows)."""
    try:
        stat = os.statvfs(SHM_PATH)
    except (OSError, AttributeError):
        return None
    return stat.f_bavail * stat.f_frsize


def open_files_limit() -> int | None:
    """The soft RLIMIT_NOFILE (`ulimit -n`); None where there is none (Windows)."""
    try:
        import resource
    except ImportError:
        return None
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    return None if soft == resource.RLIM_INFINITY else soft


def _starts_fresh(settings: LoaderSettings) -> bool:
    """Workers started by spawn/forkserver import torch anew: the strategy does not reach them."""
    method = settings.multiprocessing_context or multiprocessing.get_start_method(allow_none=True)
    return (method or multiprocessing.get_all_start_methods()[0]) != "fork"


def check_worker_limits(settings: LoaderSettings, dataset: Dataset) -> LoaderSettings:
    """Apply `loader.sharing_strategy`; with workers, warn when /dev/shm or the open-files
    limit look too small for them (sizes from one sample of `dataset`). Returns `settings`."""
    strategy = apply_sharing_strategy(settings)
    if settings.num_workers == 0:
        return settings
    auto = settings.num_workers == "auto"
    workers = available_cpus() if auto else int(settings.num_workers)
    who = f"up to {workers} workers (num_workers=auto)" if auto else f"{workers} workers"
    prefetch = settings.prefetch_factor or 2  # torch's default with workers
    sample_bytes, tensors = sample_size(next(iter(dataset), None))
    batch_bytes = sample_bytes * settings.batch_size
    need = workers * prefetch * batch_bytes * SHM_HEADROOM
    free = shm_free_bytes()
    if free is not None and free < need:
        log.warning(
            "/dev/shm has %.0f MiB free, but %s x prefetch %d x %.1f MiB batches x %.0f headroom "
            "need about %.0f MiB of it; workers then die with a bus error or 'No space left on "
            "device'. Fixes: a larger /dev/shm (Docker: --shm-size=8g), or fewer "
            "loader.num_workers, a smaller loader.prefetch_factor or loader.batch_size.",
            free / MIB, who, prefetch, batch_bytes / MIB, SHM_HEADROOM, need / MIB,
        )  # fmt: skip
    limit = open_files_limit()
    files = FD_BASE + workers * prefetch * tensors * FD_HEADROOM
    if strategy == "file_descriptor" and limit is not None and limit < files:
        log.warning(
            "open-files limit (ulimit -n) is %d, but %s sharing tensors by file descriptor "
            "(loader.sharing_strategy=file_descriptor) may need about %d; past it they fail "
            "with 'Too many open files'. Fixes: raise it before starting (ulimit -n 65536), or "
            "set loader.sharing_strategy=file_system.",
            limit, who, files,
        )  # fmt: skip
    if settings.sharing_strategy and _starts_fresh(settings):
        log.warning(
            "loader.sharing_strategy=%s reaches only forked workers; these start with "
            "torch's default (%s).", settings.sharing_strategy, TORCH_DEFAULT_STRATEGY,
        )  # fmt: skip
    return settings
