"""Seeded photo-like JPEGs for the benchmarks: an ImageFolder tree written once, then reused.

Flat synthetic images decode several times faster than photos (few non-zero DCT coefficients),
which would flatter every pipeline that decodes. These mix a smooth colour field, shapes,
textures at three scales and a little sensor noise: ~60 KB at 500x375 and ~165 KB at 1000x750
(q90, 4:2:0), the sizes of typical photos there.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
from PIL import Image, ImageDraw

FORMAT_VERSION = 1
CLASSES = 8


def photo_like(rng: np.random.Generator, width: int, height: int) -> Image.Image:
    """One RGB image: low-frequency colour field + random shapes + texture + noise."""
    field = rng.uniform(0, 255, (4, 5, 3)).astype(np.uint8)
    image = Image.fromarray(field).resize((width, height), Image.BICUBIC)
    draw = ImageDraw.Draw(image)
    for _ in range(int(rng.integers(6, 14))):
        x0, y0 = rng.uniform(-0.2, 1.0, 2) * (width, height)
        w, h = rng.uniform(0.05, 0.5, 2) * (width, height)
        colour = tuple(int(c) for c in rng.integers(0, 256, 3))
        shape = draw.ellipse if rng.random() < 0.5 else draw.rectangle
        shape((x0, y0, x0 + w, y0 + h), fill=colour)
    pixels = np.asarray(image, dtype=np.float32)
    # textures at three scales (relative to the width, so a larger image is a sharper photo
    # of the same scene), then a little sensor noise
    for per_width, amplitude in ((60, 12.0), (160, 16.0), (250, 10.0)):
        cell = max(1, round(width / per_width))
        coarse = rng.normal(0, amplitude, (height // cell + 1, width // cell + 1, 3))
        tile = Image.fromarray(np.clip(coarse + 128, 0, 255).astype(np.uint8))
        pixels += np.asarray(tile.resize((width, height), Image.BILINEAR), np.float32) - 128
    pixels += rng.normal(0, 1.5, pixels.shape).astype(np.float32)
    return Image.fromarray(np.clip(pixels, 0, 255).astype(np.uint8))


def write_image_folder(root: Path, count: int, size: tuple[int, int], seed: int) -> Path:
    """`count` JPEGs (q90) of `size` (width, height) in root/train/<class>/ and the same files
    listed as root/val (a symlink), written only when missing or made with other settings."""
    stamp = root / "settings.json"
    settings = {"version": FORMAT_VERSION, "count": count, "size": list(size), "seed": seed}
    if stamp.is_file() and json.loads(stamp.read_text()) == settings:
        return root
    rng = np.random.default_rng(seed)
    for i in range(count):
        path = root / "train" / f"class{i % CLASSES}" / f"{i:05d}.jpg"
        path.parent.mkdir(parents=True, exist_ok=True)
        photo_like(rng, *size).save(path, quality=90)
    val = root / "val"
    if not val.exists():
        val.symlink_to("train", target_is_directory=True)
    stamp.write_text(json.dumps(settings))
    return root
