"""Reduced-scale JPEG decoding gives what a full decode + the first Resize gives (tolerance)."""

from __future__ import annotations

import io

import numpy as np
import pytest
import torch
from hydra.utils import instantiate
from PIL import Image
from torchvision.transforms import v2

from bench.images import photo_like
from engine.data.datasets.imagefolder import ImageFolderDataset
from engine.data.decode import decode_image_bytes
from engine.data.decode_policy import DecodePolicy
from engine.data.folds import without_fold_keys
from engine.data.transforms import decode_min_side


def _jpeg(width: int, height: int, seed: int = 0, exif_orientation: int | None = None) -> bytes:
    image = photo_like(np.random.default_rng(seed), width, height)
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
    photo_like(np.random.default_rng(1), 600, 400).save(buffer, format="PNG")
    png = buffer.getvalue()
    assert torch.equal(decode_image_bytes(png, "p.png", 100), decode_image_bytes(png, "p.png"))


def test_decode_min_side_reads_the_first_resize(make_cfg) -> None:
    imagenet = instantiate(make_cfg("transforms=imagenet").transforms)
    assert decode_min_side(imagenet.val) == 256  # Resize 256 first
    assert decode_min_side(imagenet.train) is None  # a random crop needs every pixel
    assert decode_min_side(v2.Compose([v2.Resize([48, 40])])) == 48
    assert decode_min_side(v2.Compose([v2.Resize(64, max_size=100)])) is None
    assert decode_min_side(v2.Compose([v2.Resize(64, antialias=False)])) is None
    assert decode_min_side(None) is None


def test_datasets_decode_reduced_only_when_enabled(demo_dir, make_cfg) -> None:
    val = instantiate(make_cfg("transforms=imagenet").transforms).val
    root = str(demo_dir / "imagefolder")
    assert ImageFolderDataset(root, "val", transform=val).decode_min_side == 256
    off = ImageFolderDataset(root, "val", transform=val, decode=DecodePolicy(reduced=False))
    assert off.decode_min_side is None
    cfg = make_cfg("transforms=imagenet", "dataset.decode.reduced=false")
    node = without_fold_keys(cfg.dataset)  # the kind's own keys
    assert instantiate(node, split="val", transform=val).decode_min_side is None


def test_pillow_sees_the_same_jpeg(tmp_path) -> None:
    """The reduced path decodes with Pillow: the full-size pixels agree with torchvision's."""
    data = _jpeg(400, 300)
    pil = torch.from_numpy(np.asarray(Image.open(io.BytesIO(data)).convert("RGB")).copy())
    assert (pil.permute(2, 0, 1).int() - decode_image_bytes(data, "a.jpg").int()).abs().max() <= 1
