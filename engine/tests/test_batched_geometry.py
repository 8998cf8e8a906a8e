"""The batched crops (engine/data/batched_geometry.py) against torchvision's own pipeline on the
same draws, on the edges a helper's attack found: crops larger than the image (torchvision pads
zeros), Resize's size rules, antialias=false, PIL's interpolation code, subclasses and v1
transforms refused, the canvas's memory bound, and a JPEG whose EXIF orientation only Pillow
reads."""

from __future__ import annotations

import io
import struct

import numpy as np
import pytest
import torch
from PIL import Image
from torchvision import transforms as v1
from torchvision.transforms import v2

from engine.data import batched_geometry
from engine.data.batched_geometry import Geometry, _groups, resample, resized_size
from engine.data.encoded import BatchDecoder, EncodedBatch, encode_sample
from engine_dev.crops import seeded_draws


def _photo(height: int, width: int, seed: int = 0) -> torch.Tensor:
    """A smooth random image (what interpolation is judged on), uint8 (3, H, W)."""
    coarse = np.random.default_rng(seed).integers(0, 255, (4, 5, 3), np.uint8)
    image = Image.fromarray(coarse).resize((width, height), Image.BICUBIC)
    return torch.from_numpy(np.array(image)).permute(2, 0, 1).contiguous()


def _both(steps: list, images: list[torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
    """(torchvision per sample, the batched path) on the same seeded draws."""
    geometry, expected, plans = seeded_draws(steps, images)
    assert geometry.size is not None
    return expected, resample(images, plans, geometry.size, None, geometry.antialias)


def _mean_gap(a: torch.Tensor, b: torch.Tensor) -> float:
    return float((a.int() - b.int()).abs().float().mean())


@pytest.mark.parametrize(
    "steps",
    [
        [v2.CenterCrop(64)],  # 45 x 37: 19 and 27 padded, odd, where round() and // part
        [v2.Resize(16, antialias=True), v2.CenterCrop(40)],  # padded after an upscale
    ],
    ids=["crop-larger", "resize-then-larger-crop"],
)
def test_a_crop_larger_than_the_image_is_placed_and_padded_with_zeros_as_torchvision(steps):
    flat = torch.full((3, 37, 45), 200, dtype=torch.uint8)
    expected, batched = _both(steps, [flat])
    assert torch.equal((batched > 0), (expected > 0))  # the same rows and columns hold image
    assert _mean_gap(batched, expected) < 0.5


def test_resize_sizes_are_torchvisions_own() -> None:
    for height, width in [(375, 500), (500, 375), (64, 64), (33, 77), (10, 300)]:
        for size, max_size in [([24], None), ([30, 20], None), ([24], 40), (None, 48)]:
            resize = v2.Resize(size, max_size=max_size, antialias=True)
            shape = resize(torch.zeros(3, height, width, dtype=torch.uint8)).shape[-2:]
            assert tuple(shape) == resized_size(height, width, size, max_size)


def test_antialias_false_is_plain_bilinear_as_torchvision() -> None:
    images = [_photo(600, 800, seed) for seed in range(3)]
    expected, batched = _both([v2.Resize([64, 64], antialias=False)], images)
    assert _mean_gap(batched, expected) < 0.5  # antialiased it would be several levels apart


def test_pils_code_for_bilinear_is_bilinear() -> None:
    Geometry.of(v2.Compose([v2.Resize([8, 8], interpolation=2)]), "transforms.val")


class _Inverted(v2.RandomResizedCrop):
    def transform(self, inpt, params):  # paints otherwise than torchvision's own
        return 255 - super().transform(inpt, params)


@pytest.mark.parametrize(
    ("step", "named"),
    [
        (_Inverted(8), r"transforms\.val\[0\] \(_Inverted\) is .*_Inverted, not torchvision"),
        (
            v1.RandomResizedCrop(8),
            r"is torchvision\.transforms\.transforms\.RandomResizedCrop, not",
        ),
    ],
    ids=["subclass", "v1"],
)
def test_a_subclass_or_a_v1_transform_is_refused_naming_the_v2_class(step, named) -> None:
    with pytest.raises(ValueError, match=named + r".*v2's own RandomResizedCrop"):
        Geometry.of(v2.Compose([step]), "transforms.val")


def test_a_canvas_of_huge_photos_stays_within_its_byte_bound(monkeypatch) -> None:
    """Twelve 12 MP photos, equal in size: canvases of at most CANVAS_BYTES, not one of 1.7 GB."""
    groups = _groups([(3000, 4000)] * 12)
    assert sorted(i for group in groups for i in group) == list(range(12))
    assert all(
        3 * 4 * len(group) * 3000 * 4000 <= batched_geometry.CANVAS_BYTES for group in groups
    )
    monkeypatch.setattr(batched_geometry, "CANVAS_BYTES", 3 * 4 * 2 * 30 * 40)
    images = [_photo(30, 40, seed) for seed in range(5)]
    assert len(_groups([(30, 40)] * 5)) == 3
    expected, batched = _both([v2.Resize([16, 16], antialias=True)], images)
    assert _mean_gap(batched, expected) < 1.0  # split canvases, the same pixels


def _jpeg_with_xmp_then_exif(orientation: int) -> bytes:
    """A 60 x 30 JPEG whose EXIF orientation comes after an XMP segment: Pillow reads it,
    TorchCodec does not."""
    pixels = np.random.default_rng(0).integers(0, 255, (30, 60, 3), np.uint8)
    out = io.BytesIO()
    Image.fromarray(pixels).save(out, "JPEG", quality=90)
    tiff = b"II" + struct.pack("<HI", 42, 8) + struct.pack("<H", 1)
    tiff += struct.pack("<HHI", 0x0112, 3, 1) + struct.pack("<HH", orientation, 0)
    tiff += struct.pack("<I", 0)
    segments = [b"http://ns.adobe.com/xap/1.0/\x00<x:xmpmeta/>", b"Exif\x00\x00" + tiff]
    app1 = b"".join(b"\xff\xe1" + struct.pack(">H", len(s) + 2) + s for s in segments)
    data = out.getvalue()
    return data[:2] + app1 + data[2:]


def test_a_jpeg_whose_orientation_only_pillow_reads_is_turned_not_refused() -> None:
    data = _jpeg_with_xmp_then_exif(6)
    geometry = Geometry.of(v2.Compose([v2.CenterCrop(20)]), "transforms.val")
    sent = encode_sample(data, "xmp.jpg", 0, geometry, None)
    assert (sent.plan.height, sent.plan.width) == (60, 30)  # drawn on the turned size
    batch = EncodedBatch([sent.data], [sent.name], [0], [sent.orientation], [sent.plan])
    decoder = BatchDecoder(torch.device("cpu"), geometry, None, False, ["a"])
    out, bad = decoder.batch((batch, torch.tensor([0])))
    assert not bad and out[0].shape == (1, 3, 20, 20)
