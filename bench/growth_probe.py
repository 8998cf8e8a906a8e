"""One cell of the growth table (bench/growth.py) in a fresh process, so that every pipeline's
memory starts from the same baseline: list a dataset, then take its first shuffled batch
through 2 forked workers; prints one JSON line.

    python -m bench.growth_probe KIND PATH
    KIND: template-imagefolder | torchvision-imagefolder (PATH: the ImageFolder root)
          template-csv | tuples-csv (PATH: a CSV of path,label rows relative to its folder)
"""

from __future__ import annotations

import csv
import gc
import json
import sys
import time
from pathlib import Path

import psutil
from PIL import Image
from torch.utils.data import DataLoader, Dataset
from torchvision import datasets
from torchvision.transforms import v2

from engine.data.datasets.base import MapDataset
from engine.data.datasets.csv import CsvDataset
from engine.data.datasets.imagefolder import ImageFolderDataset
from engine.data.loader_settings import LoaderSettings
from engine.data.loaders import make_loader
from engine.data.samplers import RandomOrder
from engine.data.seeded import SeededSamples
from engine.measure.timing import BatchMeter

BATCH, WORKERS = 64, 2
TEMPLATE = ("template-imagefolder", "template-csv")


class TupleCsv(MapDataset):
    """The tutorial's CSV dataset (csv module instead of pandas, which is not installed): the
    rows as a list of (path, label) tuples, each image opened with PIL."""

    def __init__(self, csv_path: Path) -> None:
        with open(csv_path, newline="") as f:
            rows = csv.reader(f)
            next(rows)  # header
            self.samples = [(str(csv_path.parent / path), label) for path, label in rows]
        self.classes = sorted({label for _, label in self.samples})
        index = {name: i for i, name in enumerate(self.classes)}
        self.samples = [(path, index[label]) for path, label in self.samples]
        self.to_tensor = v2.PILToTensor()

    def __len__(self) -> int:
        return len(self.samples)

    def __getitem__(self, i: int) -> tuple:
        path, label = self.samples[i]
        with Image.open(path) as image:
            return self.to_tensor(image.convert("RGB")), label


def listing(kind: str, path: Path) -> Dataset:
    if kind == "template-imagefolder":
        return ImageFolderDataset(str(path), "train")
    if kind == "torchvision-imagefolder":
        return datasets.ImageFolder(str(path / "train"), transform=v2.PILToTensor())
    if kind == "template-csv":
        return CsvDataset("train", train_csv=str(path), val_csv=str(path))
    if kind == "tuples-csv":
        return TupleCsv(path)
    raise SystemExit(f"unknown kind {kind!r}; see `python -m bench.growth_probe --help`")


def loader(kind: str, dataset: Dataset) -> DataLoader:
    """The template's loader path (seeded samples, its sampler and make_loader) or the
    tutorial's DataLoader(shuffle=True); 2 workers started by fork, batch 64."""
    if kind not in TEMPLATE:
        return DataLoader(dataset, batch_size=BATCH, shuffle=True, num_workers=WORKERS)
    settings = LoaderSettings(
        batch_size=BATCH,
        shuffle=True,
        num_workers=WORKERS,
        collate_fn=None,
        pin_memory=False,
        drop_last=False,
        prefetch_factor=2,
        persistent_workers=False,
        timeout=0,
        multiprocessing_context="fork",
    )
    return make_loader(SeededSamples(dataset, 0), settings, RandomOrder(dataset, 0), False)  # type: ignore[arg-type]


def peak_rss() -> int:
    """This program's peak resident set, bytes: VmHWM starts anew at exec, while getrusage's
    ru_maxrss keeps the peak of the process that started it (under `make bench`, ~950 MB)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024  # kB
    raise RuntimeError("/proc/self/status has no VmHWM line: the growth probe needs Linux")


def main() -> None:
    kind, path = sys.argv[1], Path(sys.argv[2])
    me = psutil.Process()
    gc.collect()
    before = me.memory_info().rss
    start = time.perf_counter()  # one call, not a batch loop: batches are timed by BatchMeter
    dataset = listing(kind, path)
    listing_s = time.perf_counter() - start
    gc.collect()
    after = me.memory_info().rss
    peak = peak_rss()
    meter = BatchMeter()
    batches = meter.timed(loader(kind, dataset))
    next(batches)
    first_batch_s = meter.stop().first_batch_s
    workers = me.children()
    rss = [w.memory_info().rss for w in workers]
    uss = [w.memory_full_info().uss for w in workers]
    batches.close()
    mb = 2**20
    print(
        json.dumps(
            {
                "samples": len(dataset),  # type: ignore[arg-type]
                "listing_s": listing_s,
                "main_rss_growth_mb": (after - before) / mb,
                "main_peak_growth_mb": (peak - before) / mb,
                "first_batch_s": first_batch_s,
                "worker_rss_mb": max(rss) / mb,
                "worker_uss_mb": max(uss) / mb,
                "workers": len(workers),
            }
        )
    )


if __name__ == "__main__":
    main()
