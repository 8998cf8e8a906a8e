"""Is it data or compute? Per-epoch hints when the model waits for its batches."""

from __future__ import annotations

import importlib.util
import re
from collections.abc import Iterator
from contextlib import contextmanager

import torch
from torch.utils.data import DataLoader

from src.data.seeded import SeededSamples
from src.utils.cpus import available_cpus


def starvation_hint(wait_frac: float, threshold: float, loader: DataLoader) -> str | None:
    """Concrete next steps, in the order that usually pays most, when `wait_frac` > threshold."""
    if wait_frac <= threshold:
        return None
    cores = available_cpus()
    steps = []
    if loader.num_workers < cores:
        steps.append(f"raise loader.num_workers (now {loader.num_workers}) toward the {cores} "
                     "usable cores, or set loader.num_workers=auto to measure")  # fmt: skip
    if loader.num_workers > 0 and not loader.persistent_workers:
        steps.append("set loader.persistent_workers=true (no worker restart every epoch)")
    if loader.num_workers > 0:
        steps.append(f"raise loader.prefetch_factor (now {loader.prefetch_factor}) to 4-8")
    steps.append("store the images pre-resized near the training size (decode cost grows "
                 "with pixels): make cache, then dataset=cache")  # fmt: skip
    numbered = "; ".join(f"{i}) {step}" for i, step in enumerate(steps, 1))
    return (
        f"the model waited for data {100 * wait_frac:.0f}% of the epoch (trainer."
        f"starvation_threshold={threshold}): the loader is the bottleneck. Next steps: {numbered}."
    )


def gpu_stats(device: torch.device) -> dict[str, float]:
    """Peak GPU memory since the last call (then reset) and, with pynvml, utilisation."""
    if device.type != "cuda":
        return {}
    stats = {"gpu/peak_mem_mb": torch.cuda.max_memory_allocated(device) / 2**20}
    torch.cuda.reset_peak_memory_stats(device)
    if importlib.util.find_spec("pynvml") is not None:
        stats["gpu/utilization"] = float(torch.cuda.utilization(device))
    return stats


def loader_failure(dataset: object, err: BaseException) -> RuntimeError | None:
    """A stalled or dead loader worker explained with the samples it was reading, or None
    when `err` is something else (sample errors already name their file)."""
    text = str(err).strip()
    if not isinstance(err, RuntimeError) or not text.startswith("DataLoader"):
        return None
    in_flight = dataset.in_flight if isinstance(dataset, SeededSamples) else None
    pids = re.search(r"pid(?:\(s\))? ([\d, ]+)", text)  # the workers that died, if named
    dead = {int(pid) for pid in re.findall(r"\d+", pids.group(1))} if pids else set()
    busy = in_flight(dead or None) if in_flight is not None else []
    reading = f" while reading {', '.join(busy)}" if busy else " (sample being read: unknown)"
    return RuntimeError(
        f"{text.rstrip('.')}{reading}. Check that file (mode=validate scans them all), raise "
        "loader.timeout for slow storage, or set loader.num_workers=0 to run the loading in "
        "the main process and see where it stops."
    )


@contextmanager
def loader_failures_named(dataset: object) -> Iterator[None]:
    """Around a loop consuming a loader: a stalled or dead worker's error (raised by torch
    wherever the loop is, a dead worker's from a signal handler) re-raised naming its files."""
    try:
        yield
    except RuntimeError as err:
        failure = loader_failure(dataset, err)
        if failure is None:
            raise
        raise failure from err
