"""Tiny generated datasets for tests of both suites: a multi-label listing whose labels are
drawn as coloured patches (learnable by a tiny model), and image folders whose colour tells
the class; and the plain loader settings tests read them with."""

from __future__ import annotations

import csv
import random
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image, ImageDraw

from engine.data.loader_settings import LoaderSettings

PATCHES = {  # label: where it is drawn and in which colour (learnable by a tiny model)
    "red": ((2, 2, 14, 14), (230, 30, 30)),
    "green": ((18, 18, 30, 30), (30, 220, 30)),
    "blue": ((2, 18, 14, 30), (40, 40, 240)),
}
COLOURS = {"circle": (200, 40, 40), "square": (40, 200, 40), "star": (40, 40, 200)}


def write_listing(folder: Path, rows: list[tuple[str, str, str]], name: str = "l.csv") -> Path:
    """`name` in `folder` with path,labels,split rows, and a 32 px PNG for each path that
    shows the row's labels as coloured patches."""
    (folder / "img").mkdir(parents=True, exist_ok=True)
    for path, labels, _ in rows:
        image = Image.new("RGB", (32, 32), (0, 0, 0))
        draw = ImageDraw.Draw(image)
        for label in filter(None, labels.split("|")):
            box, colour = PATCHES.get(label, ((0, 0, 4, 4), (255, 255, 255)))
            draw.rectangle(box, fill=colour)
        image.save(folder / path)
    listing = folder / name
    with listing.open("w", newline="") as f:
        csv.writer(f).writerows([("path", "labels", "split"), *rows])
    return listing


def random_rows(n: int, seed: int = 0, val_share: float = 0.3) -> list[tuple[str, str, str]]:
    """`n` rows (path, labels, split) of random PATCHES labels, the first `val_share` val."""
    rng = random.Random(seed)
    rows = []
    for i in range(n):
        labels = [name for name in PATCHES if rng.random() < 0.5]
        split = "val" if i < n * val_share else "train"
        rows.append((f"img/{i}.png", "|".join(labels), split))
    return rows


def colour_folder(root: Path, counts: dict[str, tuple[int, int]], seed: int) -> Path:
    """root/{train,val}/<class>/*.png: noisy 12x12 images whose colour (COLOURS) tells their
    class; `counts`: (train, val) images per class."""
    rng = np.random.default_rng(seed)
    for name, per_split in counts.items():
        for split, n in zip(("train", "val"), per_split, strict=True):
            folder = root / split / name
            folder.mkdir(parents=True)
            for i in range(n):
                noise = rng.integers(-40, 40, (12, 12, 3))
                pixels = np.clip(np.array(COLOURS[name]) + noise, 0, 255).astype(np.uint8)
                Image.fromarray(pixels).save(folder / f"{name}_{i:03d}.png")
    return root


def loader_settings(batch_size: int, num_workers: int = 0, **changes: Any) -> LoaderSettings:
    """Loader settings as a test states them: `batch_size` in order, `num_workers` forked
    workers, torch's defaults for the rest (no shuffle, default collate, last batch kept, no
    pinning, prefetch or timeout); `changes` sets any other field."""
    plain = {
        "shuffle": False, "collate_fn": None, "pin_memory": False, "drop_last": False,
        "prefetch_factor": None, "persistent_workers": False, "timeout": 0,
        "multiprocessing_context": None,
    }  # fmt: skip
    return LoaderSettings(batch_size=batch_size, num_workers=num_workers, **(plain | changes))
