"""What an encoded image declares before any pixel is decoded: its format and size.

The pixel limit (`dataset.max_image_pixels`) is checked against these declared sizes, so a
file whose header claims 65500 x 65500 pixels is refused before a decoder allocates 13 GB.
JPEG headers are read here, the way libjpeg reads them (the first frame header before the
scan); every other format is identified by Pillow, which reads only the header on `open` (AVIF
through its own plugin, HEIC/HEIF through pillow-heif's). A HEIC declares its displayed size,
after its crop box if it has one; libheif itself refuses to decode more than 2^30 pixels.
"""

from __future__ import annotations

import io
import re
import struct
import warnings

import pillow_heif
from PIL import Image

# Pillow's own default (PIL.Image.MAX_IMAGE_PIXELS): the default of dataset.max_image_pixels
PILLOW_MAX_PIXELS = 89_478_485
JPEG_MAGIC = b"\xff\xd8"
# Start-of-frame markers (baseline, progressive, lossless, arithmetic): they carry the size.
_SOF = {0xC0, 0xC1, 0xC2, 0xC3, 0xC5, 0xC6, 0xC7, 0xC9, 0xCA, 0xCB, 0xCD, 0xCE, 0xCF}
_NO_LENGTH = {0x01, *range(0xD0, 0xD8)}  # TEM and RST0-7: markers without a segment

_PILLOW_PIXELS = re.compile(r"Image size \((\d+) pixels\)")  # in DecompressionBombError

# Our limit replaces Pillow's warning (an error is raised instead, naming the key).
warnings.filterwarnings("ignore", category=Image.DecompressionBombWarning)
# HEIC/HEIF (phone photos): pillow-heif's Pillow plugin, libheif bundled in its wheel, so
# `open_image` reads their header like any other format's. Registered once, here, where the
# engine opens images (TorchCodec's decode_heic would need a system libheif instead).
pillow_heif.register_heif_opener()


class ImageTooLarge(ValueError):
    """An image declares more pixels than `dataset.max_image_pixels` allows."""


class UnknownFormat(ValueError):
    """Pillow identifies no image format in the bytes."""


def _too_large(declared: str, max_pixels: int) -> ImageTooLarge:
    return ImageTooLarge(
        f"it declares {declared}, more than dataset.max_image_pixels={max_pixels:,} (a "
        "decompression bomb, or a real image that large: raise dataset.max_image_pixels if you "
        "trust it)"
    )


def check_pixels(width: int, height: int, max_pixels: int | None) -> None:
    """Raise `ImageTooLarge` when `width x height` exceeds `max_pixels` (None: no limit)."""
    if max_pixels is not None and width * height > max_pixels:
        raise _too_large(f"{width}x{height} = {width * height:,} pixels", max_pixels)


def jpeg_size(data: bytes | memoryview) -> tuple[int, int]:
    """(width, height) from the first frame header of a JPEG, as libjpeg finds it: segments
    are walked by their lengths, stray bytes before a marker and fill bytes are skipped."""
    n, i = len(data), 2
    while True:
        while i < n and data[i] != 0xFF:  # garbage between segments (libjpeg skips it too)
            i += 1
        while i < n and data[i] == 0xFF:  # fill bytes
            i += 1
        if i >= n:
            raise ValueError("truncated JPEG: no frame header (SOF) before the end of the data")
        marker = data[i]
        i += 1
        if marker in _SOF:
            if i + 7 > n:
                raise ValueError("truncated JPEG frame header")
            height, width = struct.unpack_from(">HH", data, i + 3)
            return width, height
        if marker in (0xD9, 0xDA):  # end of image, or a scan before any frame header
            raise ValueError("corrupt JPEG: no frame header (SOF) before the image data")
        if marker in _NO_LENGTH:
            continue
        if i + 2 > n:
            raise ValueError("truncated JPEG segment")
        i += struct.unpack_from(">H", data, i)[0]


def open_image(data: bytes, max_pixels: int | None) -> Image.Image:
    """A Pillow image over `data` with only its header read, its size checked against
    `max_pixels`; a file Pillow cannot identify is one clear error.

    Pillow's own limit (it refuses at twice `Image.MAX_IMAGE_PIXELS`) is raised to the user's
    larger one, and turned off by `max_pixels=None` (no limit), never lowered: it is global."""
    pillow = Image.MAX_IMAGE_PIXELS
    if pillow is not None and (max_pixels is None or max_pixels > pillow):
        Image.MAX_IMAGE_PIXELS = max_pixels
    try:
        image = Image.open(io.BytesIO(data))
    except Image.DecompressionBombError as err:  # past 2x our limit: only its pixel count known
        pixels = _PILLOW_PIXELS.search(str(err))
        declared = f"{int(pixels[1]):,} pixels" if pixels else "more pixels"
        raise _too_large(declared, max_pixels) from None  # type: ignore[arg-type]  # not None
    except Image.UnidentifiedImageError:
        raise UnknownFormat(
            f"not an image Pillow can identify: another format, or a damaged header (first "
            f"bytes {data[:12]!r})"
        ) from None
    try:
        check_pixels(*image.size, max_pixels)
    except ImageTooLarge:
        image.close()
        raise
    return image
