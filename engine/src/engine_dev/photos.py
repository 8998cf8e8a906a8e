"""Photo-like test images, and phone photos of them in the formats phones write (HEIC, AVIF),
optionally with an EXIF orientation tag. Seeded: the same call gives the same pixels."""

from __future__ import annotations

import io

import numpy as np
import pillow_heif
from PIL import Image

ORIENTATION = 0x0112  # the EXIF tag; 6 = "rotate 90 degrees clockwise to display"


def photo_like(width: int, height: int, seed: int = 0) -> Image.Image:
    """Smooth colour gradients, a texture and sensor noise: what a photo's file holds (flat
    test images leave most of a decoder, e.g. its chroma upsampling, unexercised)."""
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:height, 0:width] / max(width, height)
    phase = rng.uniform(0, 6, 3)
    channels = [np.sin(6 * x + p) * np.cos(4 * y - p) for p in phase]
    pixels = 128 + 90 * np.stack(channels, axis=-1) + rng.normal(0, 12, (height, width, 3))
    return Image.fromarray(np.clip(pixels, 0, 255).astype(np.uint8))


def phone_photo(image: Image.Image, fmt: str, orientation: int | None = None) -> bytes:
    """`image` as a HEIC ("HEIF": pillow-heif's writer) or an AVIF (Pillow's), tagged with the
    EXIF `orientation` if given; encoded at the writers' fastest settings (x265 `ultrafast`,
    AVIF speed 10: 8-14x faster than their defaults on a 1008 x 756 photo, files as large)."""
    exif = Image.Exif()
    if orientation is not None:
        exif[ORIENTATION] = orientation
    buffer = io.BytesIO()
    if fmt == "HEIF":
        heif = pillow_heif.from_pillow(image)
        heif.save(buffer, exif=exif.tobytes(), enc_params={"preset": "ultrafast"})
    else:
        image.save(buffer, fmt, exif=exif.tobytes(), speed=10)
    return buffer.getvalue()
