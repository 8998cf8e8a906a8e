"""What an encoded image declares before any pixel is decoded: its format and size.

The pixel limit (`dataset.decode.max_image_pixels`) is checked against these declared sizes, so a
file whose header claims 65500 x 65500 pixels is refused before a decoder allocates 13 GB.
JPEG headers are read here, the way libjpeg reads them (the first frame header before the
scan); every other format is identified by Pillow, which reads only the header on `open` (AVIF
through its own plugin, HEIC/HEIF through pillow-heif's). A HEIC declares its displayed size,
after its crop box if it has one; libheif itself refuses to decode more than 2^30 pixels.

A JPEG's scans are counted too: libjpeg decodes every scan over the whole image, so a small
progressive file of thousands of near-empty scans takes minutes ("Two Issues with the JPEG
Standard", libjpeg-turbo.org). libjpeg-turbo leaves the guard to the application
(TurboJPEG's TJPARAM_SCANLIMIT, djpeg -maxscans: no limit by default) and its own decompress
fuzzer sets it to 100 (fuzz/decompress.cc); encoders write ~10 (jpegtran's progressive
script: 10 for colour, 6 for grey), so past `dataset.decode.max_jpeg_scans` (default MAX_JPEG_SCANS)
a JPEG is refused before decoding.
"""

from __future__ import annotations

import io
import re
import struct
import warnings

import numpy as np
import pillow_heif
from PIL import Image

# Pillow's own default (PIL.Image.MAX_IMAGE_PIXELS): the default of dataset.decode.max_image_pixels
PILLOW_MAX_PIXELS = 89_478_485
JPEG_MAGIC = b"\xff\xd8"
# Start-of-frame markers (baseline, progressive, lossless, arithmetic): they carry the size.
_SOF = {0xC0, 0xC1, 0xC2, 0xC3, 0xC5, 0xC6, 0xC7, 0xC9, 0xCA, 0xCB, 0xCD, 0xCE, 0xCF}
_NO_LENGTH = {0x01, *range(0xD0, 0xD8)}  # TEM and RST0-7: markers without a segment
_SOS, _EOI = 0xDA, 0xD9
# The marker that ends a scan's entropy-coded data (stuffed 0xFF00 and RST0-7 lie within it)
_SCAN_END = re.compile(rb"\xff+[^\x00\xd0-\xd7\xff]")
# The default of dataset.decode.max_jpeg_scans: libjpeg-turbo's fuzzer's TJPARAM_SCANLIMIT; real files
# have ~10
MAX_JPEG_SCANS = 100

_PILLOW_PIXELS = re.compile(r"Image size \((\d+) pixels\)")  # in DecompressionBombError

# Our limit replaces Pillow's warning (an error is raised instead, naming the key).
warnings.filterwarnings("ignore", category=Image.DecompressionBombWarning)
# HEIC/HEIF (phone photos): pillow-heif's Pillow plugin, libheif bundled in its wheel, so
# `open_image` reads their header like any other format's. Registered once, here, where the
# engine opens images (TorchCodec's decode_heic would need a system libheif instead).
pillow_heif.register_heif_opener()


class ImageTooLarge(ValueError):
    """An image declares more pixels than `dataset.decode.max_image_pixels` allows."""


class TooManyScans(ValueError):
    """A JPEG holds more scans than `dataset.decode.max_jpeg_scans` allows: a decode would take
    minutes."""


class UnknownFormat(ValueError):
    """Pillow identifies no image format in the bytes."""


def _too_large(declared: str, max_pixels: int) -> ImageTooLarge:
    return ImageTooLarge(
        f"it declares {declared}, more than dataset.decode.max_image_pixels={max_pixels:,} (a "
        "decompression bomb, or a real image that large: raise dataset.decode.max_image_pixels if you "
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


def jpeg_scans(data: bytes, stop_after: int) -> int:
    """The scans (SOS markers) of a JPEG, walked as libjpeg reads it: segments by their
    lengths, each scan's entropy-coded data up to the next marker; the count stops once it
    passes `stop_after`, or at the end of the image or data (a truncated file is libjpeg's to
    name)."""
    n, i, scans = len(data), 2, 0
    while scans <= stop_after:
        i = data.find(b"\xff", i)  # garbage between segments (libjpeg skips it too)
        while 0 <= i < n and data[i] == 0xFF:  # fill bytes
            i += 1
        if not 0 <= i < n or data[i] == _EOI:
            break
        marker, i = data[i], i + 1
        if marker in _NO_LENGTH:
            continue
        if i + 2 > n:
            break
        i += struct.unpack_from(">H", data, i)[0]
        if marker == _SOS:
            scans += 1
            end = _SCAN_END.search(data, i)
            if end is None:
                break
            i = end.start()
    return scans


def check_scans(data: bytes, max_scans: int | None = MAX_JPEG_SCANS) -> None:
    """Raise `TooManyScans` when the JPEG `data` holds more than `max_scans` scans (None: no
    limit).

    Every scan starts with the bytes FF DA, and entropy-coded data stuffs each FF byte with 00,
    so their count bounds the scans from above: only a file whose count passes the limit (FF DA
    inside a segment, an EXIF thumbnail's scans) is walked exactly. On one thread, per 60 KB
    500x375 photo whose decode takes 0.74 ms: the walk 0.42 ms, `bytes.count` 0.056 ms, this
    count in numpy 0.014 ms (issue 52)."""
    if max_scans is None:
        return
    octets = np.frombuffer(data, np.uint8)
    if np.count_nonzero((octets[:-1] == 0xFF) & (octets[1:] == _SOS)) <= max_scans:
        return
    if jpeg_scans(data, max_scans) > max_scans:
        raise TooManyScans(
            f"it holds more than {max_scans:,} scans (dataset.decode.max_jpeg_scans={max_scans:,}; a "
            "progressive JPEG has about 10): this many make the decoder run for minutes, a "
            "decompression bomb; raise dataset.decode.max_jpeg_scans if this file is genuine"
        )


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
