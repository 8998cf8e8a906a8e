"""Every common image mode decodes to the same uint8 RGB that Pillow's convert('RGB') gives;
JPEGs to the pixels torchvision's decoder gave, EXIF orientation included."""

from __future__ import annotations

import io
import struct
import zlib

import numpy as np
import pytest
import torch
import torchvision.io
from PIL import Image

from engine.data.decode import decode_image_bytes
from engine_dev.photos import ORIENTATION, photo_like

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


def test_jpeg_pixels_are_torchvisions_exactly_exif_orientation_included() -> None:
    """TorchCodec (the engine's JPEG decoder) against torchvision's deprecated one, the path the
    engine took before: the same libjpeg-turbo output and the same EXIF turns, to the bit."""
    photo = photo_like(500, 375)
    for orientation in (None, *range(1, 9)):
        exif = Image.Exif()
        if orientation is not None:
            exif[ORIENTATION] = orientation
        buffer = io.BytesIO()
        photo.save(buffer, format="JPEG", quality=90, exif=exif.tobytes())
        data = buffer.getvalue()
        with pytest.warns(DeprecationWarning, match="image decoding and encoding capabilities"):
            before = torchvision.io.decode_jpeg(
                torch.frombuffer(bytearray(data), dtype=torch.uint8),
                mode=torchvision.io.ImageReadMode.RGB,
                apply_exif_orientation=True,
            )
        assert torch.equal(decode_image_bytes(data, "photo.jpg"), before), orientation


def _png16(samples: np.ndarray, colour: int) -> bytes:
    """A 16-bit PNG of `samples` (H, W * channels), colour type `colour` (0 grey, 2 RGB, 6
    RGBA): Pillow writes none but 16-bit grey."""
    height, width = samples.shape[0], samples.shape[1] // {0: 1, 2: 3, 6: 4}[colour]
    rows = b"".join(b"\x00" + row.astype(">u2").tobytes() for row in samples)

    def chunk(kind: bytes, body: bytes) -> bytes:
        return (
            struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))
        )

    header = struct.pack(">IIBBBBB", width, height, 16, colour, 0, 0, 0)
    body = chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(rows)) + chunk(b"IEND", b"")
    return b"\x89PNG\r\n\x1a\n" + body


@pytest.mark.parametrize(("colour", "channels"), [(0, 1), (2, 3), (6, 4)])
def test_16_bit_png_keeps_the_high_byte(colour: int, channels: int) -> None:
    """16-bit samples become their high byte (>> 8), as before: not TorchCodec's own rounding
    of x / 257, which differs by one for a quarter of the values."""
    samples = np.random.default_rng(2).integers(0, 2**16, (6, 5 * channels), dtype=np.uint16)
    decoded = decode_image_bytes(_png16(samples, colour), "deep.png")
    high = torch.from_numpy((samples >> 8).astype(np.uint8)).view(6, 5, channels)
    expected = high[..., :3] if channels > 1 else high.expand(6, 5, 3)
    assert decoded.dtype == torch.uint8 and torch.equal(decoded.permute(1, 2, 0), expected)


def test_an_animated_webp_gives_its_first_frame() -> None:
    """Pillow's first frame, not every frame TorchCodec would decode (nor torchvision's refusal)."""
    first, second = Image.fromarray(RGB), Image.fromarray(255 - RGB)
    buffer = io.BytesIO()
    first.save(buffer, format="WEBP", lossless=True, save_all=True, append_images=[second])
    decoded = decode_image_bytes(buffer.getvalue(), "moving.webp")
    assert np.array_equal(decoded.permute(1, 2, 0).numpy(), RGB)
