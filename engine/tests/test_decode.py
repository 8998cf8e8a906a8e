"""Every common image mode decodes to the same uint8 RGB that Pillow's convert('RGB') gives."""

from __future__ import annotations

import io

import numpy as np
import pytest
import torch
from PIL import Image

from engine.data.decode import decode_image_bytes

RGB = np.random.default_rng(0).integers(0, 256, (20, 30, 3), dtype=np.uint8)


def _encode(image: Image.Image, name: str) -> bytes:
    buffer = io.BytesIO()
    image.save(buffer, format="PNG" if name.endswith(".png") else "JPEG")
    return buffer.getvalue()


@pytest.mark.parametrize(
    ("name", "mode"),
    [
        ("l.png", "L"),
        ("p.png", "P"),
        ("rgba.png", "RGBA"),
        ("la.png", "LA"),
        ("cmyk.jpg", "CMYK"),
        ("grey.jpg", "L"),
        ("upper.JPG", "RGB"),
    ],
)
def test_modes_become_rgb_uint8(name: str, mode: str) -> None:
    data = _encode(Image.fromarray(RGB).convert(mode), name)
    decoded = decode_image_bytes(data, name)
    expected = np.asarray(Image.open(io.BytesIO(data)).convert("RGB"))
    assert decoded.dtype == torch.uint8 and decoded.shape == (3, 20, 30)
    assert np.array_equal(decoded.permute(1, 2, 0).numpy(), expected)


def test_16_bit_png_is_scaled_to_8_bits() -> None:
    grey16 = RGB[..., 0].astype(np.uint16) * 257  # 8-bit values spread over 16 bits
    decoded = decode_image_bytes(_encode(Image.fromarray(grey16), "g.png"), "g.png")
    assert decoded.dtype == torch.uint8
    assert np.array_equal(decoded[0].numpy(), RGB[..., 0])


def test_exif_orientation_is_applied() -> None:
    image = Image.fromarray(RGB)
    exif = image.getexif()
    exif[0x0112] = 6  # "rotate 90 CW to display"
    buffer = io.BytesIO()
    image.save(buffer, format="JPEG", exif=exif.tobytes())
    decoded = decode_image_bytes(buffer.getvalue(), "rotated.jpg")
    assert decoded.shape == (3, 30, 20)  # displayed upright: width and height swap
