"""How start-up and memory grow with the dataset: `python -m bench --only growth`.

For ImageFolder trees of 10k, 100k and 1M files (1,000 class folders, ImageNet-like names) and
a CSV listing the same files: listing time, the main process's memory after listing (and its
peak while listing), the first shuffled batch through 2 forked workers, and each worker's memory
then, for the template against torchvision.datasets.ImageFolder (and, for the CSV, against the
tutorial's list of (path, label) rows). Every file is a hard link to one small JPEG: listing
sees distinct names as with empty files, the first batch decodes, and no file costs an inode or
a disk block. The tree is built in a temp dir (grown size by size) and removed afterwards.

Each cell runs in a fresh process (bench/growth_probe.py), so every pipeline's memory starts
from the same baseline; the pipelines alternate within each round and ratios are medians of
per-round ratios, as everywhere in `make bench`.
"""

from __future__ import annotations

import io
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

import numpy as np

from bench.images import photo_like
from bench.timing import spread

HOW = (
    "Files: an ImageFolder tree of N files in 1,000 class folders, every file a hard link "
    "to one 64x48 JPEG (distinct names, no inode or data block per file), in a temp dir; "
    "the CSV lists the same files (path,label)."
)
SIZES = (10_000, 100_000, 1_000_000)
CLASSES = 1000
BYTES_PER_FILE = 130  # a directory entry and a CSV row (a hard link takes no inode, no block)
# (key in the probe's JSON, row name); smaller is better for all of them
QUANTITIES = (
    ("listing_s", "listing, s"),
    ("main_rss_growth_mb", "main-process RSS after listing, growth MB"),
    ("main_peak_growth_mb", "main-process peak RSS while listing, growth MB"),
    ("first_batch_s", "first batch (shuffled, 2 workers, batch 64), s"),
    ("worker_rss_mb", "per-worker RSS at the first batch, MB"),
    ("worker_uss_mb", "per-worker private memory (USS) at the first batch, MB"),
)
PAIRS = {
    "ImageFolder": ("template-imagefolder", "torchvision-imagefolder", "torchvision ImageFolder"),
    "CSV": ("template-csv", "tuples-csv", "list of (path, label) rows"),
}


def name(i: int) -> str:
    """The i-th file, relative to the split folder."""
    c = i % CLASSES
    return f"n{c:08d}/n{c:08d}_{i:08d}.JPEG"


def grow_tree(root: Path, have: int, want: int, jpeg: bytes) -> None:
    """Add files `have`..`want`-1 under root/train: hard links to one copy of `jpeg` per class
    (root/sources; a file takes at most 65,000 links on ext4)."""
    for c in range(CLASSES):
        (root / "train" / f"n{c:08d}").mkdir(parents=True, exist_ok=True)
        source = root / "sources" / f"{c}.jpg"
        if not source.exists():
            source.parent.mkdir(exist_ok=True)
            source.write_bytes(jpeg)
    for i in range(have, want):
        os.link(root / "sources" / f"{i % CLASSES}.jpg", root / "train" / name(i))


def write_csv(path: Path, count: int) -> None:
    """path,label rows for the first `count` files (paths relative to the CSV's folder)."""
    with open(path, "w") as f:
        f.write("path,label\n")
        f.writelines(f"train/{name(i)},n{i % CLASSES:08d}\n" for i in range(count))


def fitting_sizes(where: Path, sizes: tuple[int, ...], log: Callable[[str], None]) -> list[int]:
    """The sizes whose tree and CSV fit the free disk space and inodes of `where`."""
    free = os.statvfs(where)
    room, inodes = free.f_bavail * free.f_frsize, free.f_favail
    enough_inodes = inodes > 2 * CLASSES + 10  # class folders and their one JPEG each
    fit = [n for n in sizes if enough_inodes and n * BYTES_PER_FILE < room / 2]
    if len(fit) < len(sizes):
        log(f"  only {fit} fit in {where} ({room / 2**30:.1f} GiB, {inodes} inodes free)")
    return fit


def probe(kind: str, path: Path) -> dict[str, float]:
    out = subprocess.run(
        [sys.executable, "-m", "bench.growth_probe", kind, str(path)],
        check=True,
        capture_output=True,
        text=True,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def measure(
    pair: tuple[str, str], path: Path, repeats: int, log: Callable[[str], None]
) -> list[list[dict[str, float]]]:
    """`repeats` rounds of (template, reference) probes, the order alternating per round."""
    rounds = []
    for r in range(repeats):
        order = pair if r % 2 == 0 else pair[::-1]
        cells = {kind: probe(kind, path) for kind in order}
        rounds.append([cells[pair[0]], cells[pair[1]]])
        log(
            f"    round {r + 1}: listing {cells[pair[0]]['listing_s']:.2f} s (template) vs "
            f"{cells[pair[1]]['listing_s']:.2f} s"
        )
    return rounds


def table(title: str, reference: str, rows: dict[int, list[list[dict[str, float]]]]) -> str:
    lines = [
        f"**{title}**",
        "",
        f"| files | measurement | template | {reference} | template / {reference} |",
        "|---|---|---|---|---|",
    ]
    for size, rounds in rows.items():
        for key, label in QUANTITIES:
            ours, theirs = ([r[i][key] for r in rounds] for i in (0, 1))
            pairs = zip(ours, theirs, strict=True)
            ratio = statistics.median(a / b if b else float("nan") for a, b in pairs)
            lines.append(
                f"| {size:,} | {label} | {spread(ours)} | {spread(theirs)} | {ratio:.2f}x |"
            )
    return "\n".join(lines)


def growth_sections(repeats: int, log: Callable[[str], None]) -> list[str]:
    """The ImageFolder and the CSV tables, measured on one tree grown size by size."""
    results: dict[str, dict[int, list]] = {kind: {} for kind in PAIRS}
    with tempfile.TemporaryDirectory(prefix="bench-growth-") as tmp:
        root = Path(tmp)
        encoded = io.BytesIO()
        photo_like(np.random.default_rng(0), 64, 48).save(encoded, "JPEG", quality=90)
        have = 0
        for size in fitting_sizes(root, SIZES, log):
            log(f"  {size:,} files ...")
            grow_tree(root, have, size, encoded.getvalue())
            have = size
            write_csv(root / "listing.csv", size)
            for kind, pair in PAIRS.items():
                where = root if kind == "ImageFolder" else root / "listing.csv"
                results[kind][size] = measure(pair[:2], where, repeats, log)
        log("  removing the tree ...")
        shutil.rmtree(root / "train")  # the temp dir goes next; this is the slow part
    return [
        table(
            f"Growth: {kind} of N files (1,000 classes), template vs {pair[2]}, each cell in "
            f"a fresh process, {repeats} rounds",
            pair[2],
            results[kind],
        )
        for kind, pair in PAIRS.items()
    ]
