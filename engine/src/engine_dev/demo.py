"""Seeded, deterministic generator of a small procedural shape-classification demo set (and
its multi-label sibling, engine_dev/demo_multilabel.py).

Usage: ``python -m engine_dev.demo --out data/demo [--seed 0] [--force] [--small]``.
"""

from __future__ import annotations

import argparse
import csv
import inspect
import io
import json
import math
import shutil
import tarfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from PIL import Image, ImageDraw, ImageFilter
from torchvision.transforms.v2 import functional as F

from engine.data.parquet.writer import ParquetSplitWriter
from engine.data.shards.manifest import NAME as MANIFEST
from engine.data.shards.manifest import build
from engine.data.shards.members import Rules
from engine_dev.demo_multilabel import write_multilabel
from engine_dev.demo_sequences import write_sequences
from engine_dev.demo_shapes import CLASSES, draw_shape

_FORMAT_VERSION = 6  # 3: shards.json beside the shards; 4: multilabel/; 5: parquet/; 6: listing.tsv
_SMALL = {
    "train_per_class": (12, 10, 10, 8, 8),
    "val_per_class": 6,
    "shard_size": 16,
    "sequences": 90,
    "multilabel_train": 40,
    "multilabel_val": 16,
}
_OUTPUTS = (
    "imagefolder",
    "tensors",
    "shards",
    "parquet",
    "sequences",
    "train.csv",
    "val.csv",
    "samples.csv",
    "listing.tsv",
    "multilabel",
)
_MIN_SIDE, _MAX_SIDE = 40, 96  # independent width/height range in pixels
_SUPERSAMPLE = 4  # masks are drawn this much larger, then box-filtered (anti-aliased edges)
_MIN_CONTRAST = 70.0  # minimum luma distance between the shape and every background colour
_JPEG_SHARE, _BLUR_SHARE = 0.85, 0.3  # JPEG share lowered from 0.75: noisy PNGs are ~4x larger
_NOISE_SIGMA = (6.0, 10.0)  # range of the per-image Gaussian pixel-noise sigma (0-255 scale)
_SAVE_ARGS = {"jpg": {"format": "JPEG", "quality": 90}, "png": {"format": "PNG"}}


@dataclass(frozen=True)
class _Sample:
    split: str
    label: int
    index: int
    ext: str
    data: bytes

    @property
    def stem(self) -> str:
        return f"{CLASSES[self.label]}_{self.index:05d}"

    @property
    def path(self) -> str:
        return f"imagefolder/{self.split}/{CLASSES[self.label]}/{self.stem}.{self.ext}"


def _luma(colour: np.ndarray) -> float:
    return float(colour @ np.array([0.299, 0.587, 0.114]))


def _colour(rng: np.random.Generator, lo: float = 0.0, hi: float = 255.0) -> np.ndarray:
    """A random RGB colour, darkened or lightened (hue kept) until its luma lies in [lo, hi]."""
    colour = rng.uniform(0, 255, 3)
    luma = _luma(colour)
    if luma > hi:
        return colour * hi / luma
    if luma < lo:
        return 255 - (255 - colour) * (255 - lo) / (255 - luma)
    return colour


def _background(rng: np.random.Generator, w: int, h: int, fg: np.ndarray) -> np.ndarray:
    """A solid or linear-gradient (h, w, 3) background whose colours all contrast with `fg`."""
    luma = _luma(fg)
    darker = luma + _MIN_CONTRAST > 255 or (luma >= _MIN_CONTRAST and rng.random() < 0.5)
    lo, hi = (0.0, luma - _MIN_CONTRAST) if darker else (luma + _MIN_CONTRAST, 255.0)
    start = _colour(rng, lo, hi)
    if rng.random() < 0.5:
        return np.broadcast_to(start, (h, w, 3))
    end, angle = _colour(rng, lo, hi), rng.uniform(0, 2 * math.pi)
    ys, xs = np.mgrid[0:h, 0:w]
    proj = xs * math.cos(angle) + ys * math.sin(angle)
    t = (proj - proj.min()) / (proj.max() - proj.min())
    return start + (end - start) * t[..., None]


def draw_image(rng: np.random.Generator, name: str) -> Image.Image:
    """One noisy RGB image of a randomly coloured, sized, placed and rotated shape `name`."""
    w, h = (int(v) for v in rng.integers(_MIN_SIDE, _MAX_SIDE + 1, 2))
    fg = _colour(rng)
    bg = _background(rng, w, h, fg)
    r = rng.uniform(0.35, 0.8) * min(w, h) / 2
    centre = rng.uniform(r, [w - r, h - r])
    mask = Image.new("L", (w * _SUPERSAMPLE, h * _SUPERSAMPLE))
    draw = ImageDraw.Draw(mask)
    draw_shape(draw, name, centre, r, rng, _SUPERSAMPLE)
    alpha = np.asarray(mask.resize((w, h), Image.Resampling.BOX), np.float64)[..., None] / 255
    img = Image.fromarray(np.rint(bg * (1 - alpha) + fg * alpha).astype(np.uint8))
    if rng.random() < _BLUR_SHARE:
        img = img.filter(ImageFilter.GaussianBlur(rng.uniform(0.4, 0.9)))
    noisy = np.asarray(img, np.float64) + rng.normal(0, rng.uniform(*_NOISE_SIGMA), (h, w, 3))
    return Image.fromarray(np.clip(np.rint(noisy), 0, 255).astype(np.uint8))


def _sample(rng: np.random.Generator, split: str, label: int, index: int) -> _Sample:
    buf, ext = io.BytesIO(), "jpg" if rng.random() < _JPEG_SHARE else "png"
    draw_image(rng, CLASSES[label]).save(buf, **_SAVE_ARGS[ext])
    return _Sample(split, label, index, ext, buf.getvalue())


def _write_csv(path: Path, header: Sequence[str], rows: list[tuple[str, ...]]) -> None:
    with path.open("w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f, lineterminator="\n")
        writer.writerow(header)
        writer.writerows(rows)


def _write_tensors(path: Path, samples: list[_Sample], size: int) -> None:
    """Decode the written bytes (as the PIL loader does) and resize each image to size x size."""
    inputs = [
        F.resize(
            F.pil_to_tensor(Image.open(io.BytesIO(s.data)).convert("RGB")),
            [size, size],
            antialias=True,
        )
        for s in samples
    ]
    labels = torch.tensor([s.label for s in samples], dtype=torch.int64)
    torch.save(
        {"inputs": torch.stack(inputs).contiguous(), "labels": labels, "classes": list(CLASSES)},
        path,
    )


def _add_member(tar: tarfile.TarFile, name: str, data: bytes) -> None:
    info = tarfile.TarInfo(name)
    info.size, info.mtime, info.mode, info.uid, info.gid = len(data), 0, 0o644, 0, 0
    info.uname = info.gname = ""
    tar.addfile(info, io.BytesIO(data))


def _write_shards(
    shard_dir: Path, split: str, samples: list[_Sample], shard_size: int, rng: np.random.Generator
) -> None:
    """WebDataset tars of `KEY.<ext>` + `KEY.cls` pairs, in a seeded random order."""
    order = rng.permutation(len(samples))
    for shard, start in enumerate(range(0, len(samples), shard_size)):
        path = shard_dir / f"{split}-{shard:06d}.tar"
        with tarfile.open(path, "w", format=tarfile.USTAR_FORMAT) as tar:
            for i in order[start : start + shard_size]:
                s = samples[i]
                _add_member(tar, f"{split}_{s.stem}.{s.ext}", s.data)
                _add_member(tar, f"{split}_{s.stem}.cls", str(s.label).encode("ascii"))


def _write_parquet(folder: Path, split: str, samples: list[_Sample], rows: int, seed: int) -> None:
    """The split as Parquet files of `rows` rows in the Hugging Face layout, row groups of a
    quarter file (several per file, as a real set has), in a random order of its own seed."""
    order = np.random.default_rng([seed, 1]).permutation(len(samples))
    writer = ParquetSplitWriter(
        folder, split, len(samples), list(CLASSES), False, rows, max(1, rows // 4)
    )
    for i in order:
        writer.add(samples[i].data, Path(samples[i].path).name, samples[i].label)
    writer.close()


def _fingerprint(train_per_class: Sequence[int], **params: int) -> str:
    """Short JSON of the generation parameters + format version, stored in `.complete`."""
    params |= {
        "format_version": _FORMAT_VERSION,
        "train_per_class": [int(n) for n in train_per_class],
    }
    return json.dumps(params, sort_keys=True)


def _clear(out: Path) -> None:
    """Remove what a previous run wrote (and only that, so a mistaken `out` stays harmless)."""
    (out / ".complete").unlink(missing_ok=True)
    for name in _OUTPUTS:
        if (out / name).is_dir():
            shutil.rmtree(out / name)
        else:
            (out / name).unlink(missing_ok=True)


def make_demo_data(
    out: str | Path,
    *,
    train_per_class: Sequence[int] = (480, 420, 370, 330, 300),
    val_per_class: int = 90,
    tensor_size: int = 48,
    shard_size: int = 256,
    sequences: int = 3000,
    multilabel_train: int = 800,
    multilabel_val: int = 200,
    seed: int = 0,
) -> Path:
    """Write the demo set under `out` (all four image formats, token sequences and the
    multi-label set); return `out`."""
    if len(train_per_class) != len(CLASSES) or shard_size < 1:
        raise ValueError(f"need {len(CLASSES)} train counts and shard_size >= 1")
    out = Path(out)
    counts = {"train": [int(n) for n in train_per_class], "val": [val_per_class] * len(CLASSES)}
    fingerprint = _fingerprint(
        train_per_class,
        val_per_class=val_per_class,
        tensor_size=tensor_size,
        shard_size=shard_size,
        sequences=sequences,
        multilabel_train=multilabel_train,
        multilabel_val=multilabel_val,
        seed=seed,
    )
    _clear(out)
    for name in ("tensors", "shards", "parquet"):
        (out / name).mkdir(parents=True, exist_ok=True)
    rng = np.random.Generator(np.random.PCG64(seed))
    splits = {
        split: [_sample(rng, split, label, i) for label, n in enumerate(ns) for i in range(n)]
        for split, ns in counts.items()
    }
    for split, samples in splits.items():
        for s in samples:
            (out / s.path).parent.mkdir(parents=True, exist_ok=True)
            (out / s.path).write_bytes(s.data)
        _write_csv(
            out / f"{split}.csv", ("path", "label"), [(s.path, CLASSES[s.label]) for s in samples]
        )
        _write_tensors(out / "tensors" / f"{split}.pt", samples, tensor_size)
        _write_shards(out / "shards", split, samples, shard_size, rng)
        _write_parquet(out / "parquet", split, samples, shard_size, seed)
    rows = [(s.path, CLASSES[s.label], s.split) for samples in splits.values() for s in samples]
    _write_csv(out / "samples.csv", ("path", "label", "split"), rows)
    # the walk-through's own dataset reads this listing (docs/walkthrough.md, MyListing)
    listing = "".join(f"{split}\t{path}\t{label}\n" for path, label, split in rows)
    (out / "listing.tsv").write_text(listing, "utf-8")
    (out / "shards" / "classes.txt").write_text("".join(f"{c}\n" for c in CLASSES), "utf-8")
    shards = sorted(str(p) for p in (out / "shards").glob("*.tar"))
    build(shards, str(out / "shards" / MANIFEST), Rules(), list(CLASSES))
    write_sequences(out / "sequences", sequences, sequences // 5, rng)
    write_multilabel(out / "multilabel", multilabel_train, multilabel_val, seed)
    (out / ".complete").write_text(fingerprint, "utf-8")
    return out


def main(argv: list[str] | None = None) -> None:
    """CLI: generate the demo set unless `out/.complete` already matches the parameters."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("data/demo"), help="output directory")
    parser.add_argument("--seed", type=int, default=0, help="random seed")
    parser.add_argument("--force", action="store_true", help="regenerate even if complete")
    parser.add_argument("--small", action="store_true", help="tiny set for quick checks")
    args = parser.parse_args(argv)
    signature = inspect.signature(make_demo_data).parameters.values()
    params = {p.name: p.default for p in signature if p.kind is p.KEYWORD_ONLY}
    params |= {**(_SMALL if args.small else {}), "seed": args.seed}
    marker = args.out / ".complete"
    if not args.force and marker.is_file() and marker.read_text("utf-8") == _fingerprint(**params):
        print(f"Demo data already in {args.out} (use --force to regenerate).")
        return
    start = time.perf_counter()
    make_demo_data(args.out, **params)
    print(f"Wrote demo data to {args.out} in {time.perf_counter() - start:.1f} s.")


if __name__ == "__main__":
    main()
