"""Reduced-scale JPEG decoding gives what a full decode + the first Resize gives (tolerance),
and only where the pipeline's first step is a Resize it can decode to; other formats and
small sources decode in full."""

from __future__ import annotations

import io

import numpy as np
import pytest
import torch
from PIL import Image
from torchvision.transforms import v2

from engine.data.decode import decode_image_bytes
from engine.data.transforms import decode_min_side
from engine_dev.photos import photo_like


def _jpeg(width: int, height: int, seed: int = 0, exif_orientation: int | None = None) -> bytes:
    image = photo_like(width, height, seed)
    exif = image.getexif()
    if exif_orientation is not None:
        exif[0x0112] = exif_orientation
    buffer = io.BytesIO()
    image.save(buffer, format="JPEG", quality=90, exif=exif.tobytes())
    return buffer.getvalue()


@pytest.mark.parametrize(
    ("size", "side", "orientation", "mean_levels"),
    [
        ((800, 600), 256, None, 1.5),  # decoded at 1/2 scale
        ((600, 800), 128, None, 1.5),  # 1/4, portrait
        ((800, 600), 200, 6, 1.5),  # 1/2, rotated by its EXIF tag
        ((1000, 750), 90, None, 2.5),
    ],  # 1/8: DC coefficients only, a box filter
)
def test_reduced_decode_matches_full_decode_then_resize(size, side, orientation, mean_levels):
    data = _jpeg(*size, exif_orientation=orientation)
    val = v2.Compose([v2.Resize(side, antialias=True), v2.CenterCrop(side)])
    reference = val(decode_image_bytes(data, "a.jpg"))
    reduced_raw = decode_image_bytes(data, "a.jpg", min_side=side)
    full = decode_image_bytes(data, "a.jpg")
    assert reduced_raw.shape == v2.Resize(side, antialias=True)(full).shape  # exactly that size
    reduced = val(reduced_raw)
    diff = (reduced.int() - reference.int()).abs().float()
    assert reduced.dtype == torch.uint8 and reduced.shape == reference.shape
    assert diff.mean() < mean_levels and diff.flatten().quantile(0.99) < 16


def test_small_sources_and_other_formats_decode_in_full() -> None:
    small = _jpeg(300, 200)  # short side 200 < 2 x 128
    assert torch.equal(decode_image_bytes(small, "s.jpg", 128), decode_image_bytes(small, "s.jpg"))
    buffer = io.BytesIO()
    photo_like(600, 400, seed=1).save(buffer, format="PNG")
    png = buffer.getvalue()
    assert torch.equal(decode_image_bytes(png, "p.png", 100), decode_image_bytes(png, "p.png"))


def test_decode_min_side_reads_a_first_resize_it_can_decode_to() -> None:
    """A Resize of one side (antialiased, no max_size) first: its side; anything else: none."""
    assert decode_min_side(v2.Compose([v2.Resize([48, 40])])) == 48
    assert decode_min_side(v2.Compose([v2.Resize(64, max_size=100)])) is None
    assert decode_min_side(v2.Compose([v2.Resize(64, antialias=False)])) is None
    assert decode_min_side(v2.Compose([v2.RandomResizedCrop(64), v2.Resize(32)])) is None
    assert decode_min_side(None) is None


def test_pillow_sees_the_same_jpeg(tmp_path) -> None:
    """The reduced path decodes with Pillow: the full-size pixels agree with torchvision's."""
    data = _jpeg(400, 300)
    pil = torch.from_numpy(np.asarray(Image.open(io.BytesIO(data)).convert("RGB")).copy())
    assert (pil.permute(2, 0, 1).int() - decode_image_bytes(data, "a.jpg").int()).abs().max() <= 1
