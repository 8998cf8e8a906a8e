"""Host limits loader workers run into: /dev/shm size and open files (`loader.sharing_strategy`).

Workers hand each batch to the main process through shared memory (/dev/shm on Linux). With
torch's default `file_descriptor` strategy every shared tensor in flight also holds an open
file. Both limits are checked before the first batch, and a warning says what to change.
Batch sizes are estimated from the first sample of the first few that reads: an unreadable
one is the loader's to report (as `dataset.decode.on_error` says, and mode=validate's scan lists it),
not this estimate's to stop the run over in the main process.
"""

from __future__ import annotations

import logging
import os
from typing import Any

import numpy as np
import torch
import torch.multiprocessing as torch_mp
from torch.utils.data import Dataset, IterableDataset

from engine.data.bad_samples import BadSample
from engine.data.decode import SampleError
from engine.data.loader_settings import LoaderSettings

log = logging.getLogger(__name__)

SHM_PATH = "/dev/shm"
SHM_HEADROOM = 2.0  # x the in-flight batches: collation copies, pinning, allocator slack
FD_HEADROOM = 4  # x the tensors in flight: batches the main process still holds
FD_BASE = 256  # files the process keeps open anyway (libraries, logs, dataset files)
MIB = 2**20
SIZE_PROBES = 8  # samples tried for one that reads, to size the batches


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


def first_readable(dataset: Dataset) -> Any:
    """The first of `dataset`'s first SIZE_PROBES samples that reads (None if none does); a
    stream's first sample. Unreadable ones are skipped here: the loader reports them."""
    if isinstance(dataset, IterableDataset):
        return next(iter(dataset), None)
    for index in range(min(len(dataset), SIZE_PROBES)):  # type: ignore[arg-type]
        try:
            sample = dataset[index]
        except SampleError:
            continue
        if not isinstance(sample, BadSample):
            return sample
    return None


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


def warn_host_limits(settings: LoaderSettings, dataset: Dataset) -> None:
    """With workers, warn when /dev/shm or the open-files limit look too small for them
    (sizes from one sample of `dataset`); `settings.num_workers` is a count by now."""
    workers = settings.num_workers
    if workers == 0:
        return
    prefetch = settings.prefetch_factor or 2  # torch's default with workers
    sample_bytes, tensors = sample_size(first_readable(dataset))
    batch_bytes = sample_bytes * settings.batch_size
    need = workers * prefetch * batch_bytes * SHM_HEADROOM  # type: ignore[operator]
    free = shm_free_bytes()
    if free is not None and free < need:
        log.warning(
            "/dev/shm has %.0f MiB free, but %d workers x prefetch %d x %.1f MiB batches x %.0f "
            "headroom need about %.0f MiB of it; workers then die with a bus error or 'No space "
            "left on device'. Fixes: a larger /dev/shm (Docker: --shm-size=8g), or fewer "
            "loader.num_workers, a smaller loader.prefetch_factor or loader.batch_size.",
            free / MIB,
            workers,
            prefetch,
            batch_bytes / MIB,
            SHM_HEADROOM,
            need / MIB,
        )
    limit = open_files_limit()
    files = FD_BASE + workers * prefetch * tensors * FD_HEADROOM  # type: ignore[operator]
    strategy = torch_mp.get_sharing_strategy()
    if strategy == "file_descriptor" and limit is not None and limit < files:
        log.warning(
            "open-files limit (ulimit -n) is %d, but %d workers sharing tensors by file "
            "descriptor (loader.sharing_strategy=file_descriptor) may need about %d; past it "
            "they fail with 'Too many open files'. Fixes: raise it before starting (ulimit -n "
            "65536), or set loader.sharing_strategy=file_system.",
            limit,
            workers,
            files,
        )
