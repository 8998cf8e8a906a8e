"""The multi-label demo: 64 px images of 1 to 3 different shapes in one colour, tagged with
every shape they show and that colour (`circle|star|red`); a few show nothing (no label).

Written as `multilabel/<split>/<index>.<ext>` with one `multilabel/labels.csv` (path,labels,split;
labels `|`-separated, paths relative to the CSV), for `experiment=multilabel_csv`. Drawn from a
random stream of its own (seed, 1), so the single-label demo's images do not depend on it.
"""

from __future__ import annotations

import csv
import io
import math
from pathlib import Path

import numpy as np
from PIL import Image, ImageDraw, ImageFilter

from engine_dev.demo_shapes import CLASSES, draw_shape

COLOURS: tuple[str, ...] = ("red", "green", "blue")  # tag k: channel k dominates every shape
LABELS: tuple[str, ...] = tuple(sorted(CLASSES + COLOURS))  # the class list: the sorted union
SIDE = 64  # image width and height, pixels
_SHAPE_ODDS = np.array([480, 420, 370, 330, 300]) / 1900  # the single-label demo's imbalance
_COUNT_ODDS = (0.05, 0.35, 0.35, 0.25)  # P(0, 1, 2, 3 shapes); 0 = an unlabelled image
_RADIUS = (12.0, 17.0)  # shape radius range, pixels
_MAX_TURN = math.pi / 8  # shapes are turned by at most this (radians): near-upright, quick to learn
_GAP = 2.0  # least distance between two shapes' enclosing circles, pixels
_SUPERSAMPLE = 4  # the mask is drawn this much larger, then box-filtered (anti-aliased edges)
_JPEG_SHARE, _BLUR_SHARE = 0.85, 0.15
_NOISE_SIGMA = (3.0, 6.0)  # range of the per-image Gaussian pixel-noise sigma (0-255 scale)


def _places(rng: np.random.Generator, k: int) -> list[tuple[np.ndarray, float]]:
    """(centre, radius) of `k` shapes inside the image whose enclosing circles do not touch:
    drawn at random, each retried until it fits (radii shrink if it keeps failing)."""
    placed: list[tuple[np.ndarray, float]] = []
    shrink = 1.0
    while len(placed) < k:
        for _ in range(100):
            r = rng.uniform(*_RADIUS) * shrink
            centre = rng.uniform(r + 1, SIDE - r - 1, 2)
            if all(np.hypot(*(centre - c)) >= r + q + _GAP for c, q in placed):
                placed.append((centre, r))
                break
        else:
            shrink *= 0.9
    return placed


def _tint(rng: np.random.Generator, colour: int) -> np.ndarray:
    """An RGB colour whose channel `colour` is bright and the others dark."""
    rgb = rng.uniform(0, 70, 3)
    rgb[colour] = rng.uniform(170, 255)
    return rgb


def _image(rng: np.random.Generator) -> tuple[Image.Image, list[str]]:
    """One noisy image on a grey background and its labels (shapes sorted, then the colour)."""
    k = int(rng.choice(len(_COUNT_ODDS), p=_COUNT_ODDS))
    shapes = sorted(rng.choice(len(CLASSES), k, replace=False, p=_SHAPE_ODDS).tolist())
    colour = int(rng.integers(len(COLOURS)))
    mask = Image.new("L", (SIDE * _SUPERSAMPLE, SIDE * _SUPERSAMPLE))
    draw = ImageDraw.Draw(mask)
    for label, (centre, r) in zip(shapes, _places(rng, k), strict=True):
        draw_shape(draw, CLASSES[label], centre, r, rng, _SUPERSAMPLE, _MAX_TURN)
    alpha = np.asarray(mask.resize((SIDE, SIDE), Image.Resampling.BOX), np.float64)[..., None]
    bg = np.full(3, rng.uniform(60, 220))
    pixels = bg * (1 - alpha / 255) + _tint(rng, colour) * alpha / 255
    img = Image.fromarray(np.rint(pixels).astype(np.uint8))
    if rng.random() < _BLUR_SHARE:
        img = img.filter(ImageFilter.GaussianBlur(rng.uniform(0.4, 0.9)))
    noise = rng.normal(0, rng.uniform(*_NOISE_SIGMA), (SIDE, SIDE, 3))
    img = Image.fromarray(np.clip(np.rint(np.asarray(img) + noise), 0, 255).astype(np.uint8))
    return img, [CLASSES[s] for s in shapes] + ([COLOURS[colour]] if k else [])


def write_multilabel(out: Path, n_train: int, n_val: int, seed: int) -> None:
    """`n_train` + `n_val` images under `out` and `out/labels.csv` listing both splits."""
    rng = np.random.Generator(np.random.PCG64([seed, 1]))
    rows = []
    for split, n in (("train", n_train), ("val", n_val)):
        (out / split).mkdir(parents=True, exist_ok=True)
        for i in range(n):
            img, labels = _image(rng)
            jpeg = rng.random() < _JPEG_SHARE
            buf = io.BytesIO()
            img.save(buf, **({"format": "JPEG", "quality": 90} if jpeg else {"format": "PNG"}))
            path = f"{split}/{i:05d}.{'jpg' if jpeg else 'png'}"
            (out / path).write_bytes(buf.getvalue())
            rows.append((path, "|".join(labels), split))
    with (out / "labels.csv").open("w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f, lineterminator="\n")
        writer.writerow(("path", "labels", "split"))
        writer.writerows(rows)
