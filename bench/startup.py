"""Start-up costs with a million metadata entries: epoch re-entry (a new epoch's `iter()` to its
first batch) with persistent vs restarted workers, and how much each worker's private memory
grows over an epoch that touches every entry (copy-on-read), for the template's numpy-backed
listing vs a torchvision-style list of (path, label) tuples."""

from __future__ import annotations

import statistics
from collections.abc import Callable
from typing import Any

import numpy as np
import psutil
from torch.utils.data import DataLoader, Dataset

from engine.data.datasets.base import MapDataset
from engine.data.datasets.image_files import LabelledImageFiles
from engine.data.loader_settings import LoaderSettings
from engine.data.loaders import make_loader
from engine.data.samplers import RandomOrder
from engine.data.seeded import SeededSamples
from engine.measure.timing import BatchMeter

ENTRIES = 1_000_000
BATCH = 1024


def fake_paths(count: int) -> list[str]:
    """Paths of ImageNet-like length (~60 characters)."""
    return [
        f"/datasets/imagenet/train/n{i % 1000:08d}/n{i % 1000:08d}_{i:07d}.JPEG"
        for i in range(count)
    ]


class TemplateListing(LabelledImageFiles):
    """The template's listing (paths and labels in numpy arrays); a sample is only its
    metadata (path length, label), so the epoch costs metadata access, not decoding."""

    draws_random = False  # no augmentation to seed (engine/src/engine/data/seeded.py)

    def __getitem__(self, index: int) -> tuple[int, int]:
        return len(self.get_filename(index)), int(self.targets[index])


class TupleListing(MapDataset):
    """torchvision's DatasetFolder layout: `samples`, a list of (path, label) tuples."""

    def __init__(self, paths: list[str], labels: np.ndarray) -> None:
        self.samples = [(p, int(label)) for p, label in zip(paths, labels, strict=True)]

    def __len__(self) -> int:
        return len(self.samples)

    def __getitem__(self, index: int) -> tuple[int, int]:
        path, label = self.samples[index]
        return len(path), label


def _settings(workers: int, persistent: bool, context: str | None) -> LoaderSettings:
    return LoaderSettings(
        batch_size=BATCH,
        shuffle=True,
        num_workers=workers,
        collate_fn=None,
        pin_memory=False,
        drop_last=False,
        prefetch_factor=2,
        persistent_workers=persistent,
        timeout=0,
        multiprocessing_context=context,
    )


def _worker_uss_mb(loader: DataLoader) -> list[float]:
    """Private memory (USS) of each live worker of `loader`, MB."""
    pids = [w.pid for w in getattr(loader._iterator, "_workers", [])]
    return [psutil.Process(pid).memory_full_info().uss / 2**20 for pid in pids]


def memory_growth(dataset: Dataset, workers: int = 2) -> float:
    """Largest growth of a worker's private memory over one full epoch, MB."""
    loader = make_loader(dataset, _settings(workers, True, "fork"), RandomOrder(dataset, 0), False)  # type: ignore[arg-type]
    batches = iter(loader)
    next(batches)
    before = _worker_uss_mb(loader)
    for _ in batches:
        pass
    after = _worker_uss_mb(loader)
    del batches, loader
    return max(a - b for a, b in zip(after, before, strict=True))


def reentry_ms(dataset: Dataset, persistent: bool, context: str, epochs: int) -> list[float]:
    """ms from `iter(loader)` to the first batch of each of `epochs` later epochs (persistent
    workers are started by a full first epoch; restarted ones start in every `iter`)."""
    settings = _settings(2, persistent, context)
    loader = make_loader(dataset, settings, RandomOrder(dataset, 0), False)  # type: ignore[arg-type]
    for _ in loader if persistent else ():  # epoch 1
        pass
    times = []
    for _ in range(epochs):
        meter = BatchMeter()
        batches = meter.timed(loader)  # the clock starts before iter(loader)
        next(batches)
        times.append(1000 * meter.stop().first_batch_s)
        batches.close()  # restarted workers stop here
    return times


def startup_rows(repeats: int, log: Callable[[str], None]) -> list[tuple[str, Any]]:
    """(row name, values) for the start-up table."""
    labels = np.arange(ENTRIES) % 1000
    # one listing alive at a time: a worker's garbage collector walks every Python object it
    # inherited, so the tuples of one listing would show up as growth of the other
    template = SeededSamples(
        TemplateListing(fake_paths(ENTRIES), labels, list(map(str, range(1000)))), 0
    )
    rows: list[tuple[str, Any]] = []
    for name, persistent, context, n in (
        ("epoch re-entry, persistent workers (fork)", True, "fork", repeats),
        ("epoch re-entry, workers restarted each epoch (fork)", False, "fork", repeats),
        ("epoch re-entry, workers restarted each epoch (spawn)", False, "spawn", 2),
    ):
        times = reentry_ms(template, persistent, context, n)
        log(f"  {name}: {statistics.median(times):.0f} ms")
        rows.append((f"{name}, ms", times))
    growth = {"template listing (numpy arrays)": memory_growth(template)}
    del template  # before the tuples exist
    growth["list of (path, label) tuples"] = memory_growth(
        TupleListing(fake_paths(ENTRIES), labels)
    )
    for name, mb in growth.items():
        log(f"  worker memory growth, {name}: {mb:.1f} MB")
        rows.append((f"worker private memory growth over an epoch, {name}, MB", [mb]))
    return rows
