"""Decode image files straight to uint8 CHW RGB tensors, safely.

The format is read from the bytes, never from the file name; the decoder for each was picked by
measurement on one thread (`make bench-decode`, BENCHMARKS.md: 500x375 photo-like images,
images/s as a ratio to Pillow's). TorchCodec decodes JPEG (1.40x; torchvision's deprecated
decoder, used before, 1.42x: a tie, the same libjpeg-turbo and the same pixels), PNG (1.18x;
Pillow and a pre-check before) and still WebP (1.19x; torchvision's 1.21x). Pillow decodes GIF
(TorchCodec: 0.68x), AVIF (TorchCodec: 1.02x, a tie), HEIC/HEIF through pillow-heif
(TorchCodec: 0.74x, and it needs a system libheif), every other format (BMP, TIFF, PPM, ...),
an animated WebP's first frame (TorchCodec would decode every frame) and a JPEG at reduced
scale (draft mode). TorchCodec turns a JPEG or PNG upright by its EXIF orientation itself;
Pillow's images are turned here. TorchCodec's PNG decoder raises on image data shorter than the
header declares (torchvision's crashed the process with SIGSEGV, Pillow filled the rows with
black; engine/tests/test_fuzz.py reads such a file in a child process), so PNG needs no
pre-check. Every path checks the declared size against the pixel limit
(`dataset.decode.max_image_pixels`) before it decodes, and a JPEG's scan count against
`dataset.decode.max_jpeg_scans` (engine/data/image_header.py). A failure is one line with the
decoder's own cause, the warnings it gave on the way appended.
"""

from __future__ import annotations

import os
import re
import warnings
from collections.abc import Iterator
from contextlib import contextmanager

import numpy as np
import torch
from PIL import Image, ImageOps
from torchcodec.decoders import decode_jpeg, decode_png, decode_webp
from torchvision.transforms.v2.functional import resize

from engine.core.text import shown
from engine.data.image_header import (
    JPEG_MAGIC,
    MAX_JPEG_SCANS,
    PILLOW_MAX_PIXELS,
    ImageTooLarge,
    TooManyScans,
    UnknownFormat,
    check_pixels,
    check_scans,
    jpeg_size,
    open_image,
)
from engine.data.safe_read import max_file_bytes, read_regular_file

# File name suffixes that count as images when a folder is listed (the content decides the
# decoder).
IMAGE_SUFFIXES = (
    ".jpg", ".jpeg", ".png", ".webp", ".bmp", ".gif", ".ppm", ".pgm", ".tif", ".tiff",
    ".heic", ".heif", ".avif",
)  # fmt: skip
_SIXTEEN_BIT = ("I;16", "I;16B", "I;16L", "I;16N")

# TorchCodec's C++ errors start with "function, /build/path/file.cpp:171, ": noise to a user.
_CPP_LOCATION = re.compile(r"^\S+, \S+\.(?:cpp|h):\d+, ")


class SampleError(RuntimeError):
    """A sample could not be read; the message names the file and the sample index."""


def describe_error(err: BaseException) -> str:
    """The first two sentences of `err`'s first line, without TorchCodec's source location,
    then its notes (the warnings its decoding gave)."""
    text = str(err).strip()
    first = _CPP_LOCATION.sub("", text.splitlines()[0]) if text else type(err).__name__
    return "; ".join([". ".join(first.split(". ")[:2]).rstrip("."), *getattr(err, "__notes__", [])])


@contextmanager
def _warnings_in_error() -> Iterator[None]:
    """Warnings the block gives (Pillow's `Truncated File Read`, ...) become notes of the error
    it raises, so they are reported with the file; if it raises none, they are shown as usual."""
    with warnings.catch_warnings(record=True) as caught:
        try:
            yield
        except Exception as err:
            for message in dict.fromkeys(" ".join(str(w.message).split()) for w in caught):
                err.add_note(f"warned: {message}")
            raise
    for warning in caught:
        warnings.warn(warning.message, stacklevel=3)


def pil_to_rgb(img: Image.Image) -> torch.Tensor:
    """uint8 (3, H, W) from a Pillow image, upright (EXIF orientation) and RGB; 16-bit grey
    is scaled to 8 bits by `>> 8`, as a 16-bit PNG file is (convert('RGB') would clip it).
    `model.preprocess` converts a PIL image here too, so it gives what its file gives."""
    img = ImageOps.exif_transpose(img)
    if img.mode in _SIXTEEN_BIT:
        grey = (np.asarray(img).astype(np.uint16) >> 8).astype(np.uint8)
        return torch.from_numpy(grey).expand(3, *grey.shape).contiguous()
    return torch.from_numpy(np.asarray(img.convert("RGB")).copy()).permute(2, 0, 1).contiguous()


def _reduced_jpeg(img: Image.Image, min_side: int) -> torch.Tensor:
    """A JPEG (opened, header read) decoded at the smallest DCT scale (1/2, 1/4 or 1/8:
    libjpeg's scaled IDCT, via Pillow's draft mode) that keeps the shorter side >= `min_side`,
    then resized to the exact size `Resize(min_side)` gives the full image (so a following
    Resize(min_side) does nothing)."""
    width, height = img.size  # before the EXIF rotation
    img.draft("RGB", (min_side, min_side))  # picks scale = largest of 8, 4, 2 <= short // min
    rgb = ImageOps.exif_transpose(img).convert("RGB")
    # HWC memory seen as CHW: torchvision resizes uint8 fastest in this layout
    image = torch.from_numpy(np.asarray(rgb).copy()).permute(2, 0, 1)
    if (image.shape[1] > image.shape[2]) != (height > width):  # rotated by its EXIF tag
        width, height = height, width
    short, long = sorted((width, height))
    size = (min_side, int(min_side * long / short))  # torchvision's rule for Resize(int)
    return resize(image, list(size if height <= width else size[::-1]), antialias=True)


def _full_jpeg(data: bytes) -> torch.Tensor:
    """A JPEG decoded at full size by TorchCodec (libjpeg-turbo), which turns it upright by its
    EXIF orientation itself."""
    return decode_jpeg(data, mode="RGB")


def _png(data: bytes) -> torch.Tensor:
    """A PNG decoded by TorchCodec (libpng), upright by its eXIf orientation; 16-bit samples
    become 8-bit by `>> 8`, as Pillow's path did (TorchCodec's own 8-bit output rounds x / 257,
    one level off for a quarter of the values)."""
    image = decode_png(data, mode="RGB", output_dtype="auto")
    return image if image.dtype == torch.uint8 else (image.to(torch.int32) >> 8).to(torch.uint8)


def decode_image_bytes(
    data: bytes | np.ndarray,
    name: str,
    min_side: int | None = None,
    max_pixels: int | None = PILLOW_MAX_PIXELS,
    max_scans: int | None = MAX_JPEG_SCANS,
) -> torch.Tensor:
    """Decode encoded image bytes to a uint8 RGB tensor (3, H, W); `name` is for messages.

    The declared size must be within `max_pixels` and a JPEG's scans within `max_scans` (None:
    no limit), checked before decoding.
    With `min_side` (the shorter side the next resize needs), a JPEG at least twice that size
    is decoded at reduced scale and returned as Resize(min_side) of the full image would be.
    """
    del name  # the caller names the file in its error; the bytes decide the format
    if len(data) == 0:
        raise ValueError("the file is empty (0 bytes)")
    with _warnings_in_error():
        data = bytes(data) if isinstance(data, np.ndarray) else data
        return _decode(data, min_side, max_pixels, max_scans)


def _decode(
    data: bytes, min_side: int | None, max_pixels: int | None, max_scans: int | None
) -> torch.Tensor:
    """decode_image_bytes of non-empty `data`."""
    if data[:2] == JPEG_MAGIC:
        width, height = jpeg_size(data)
        check_pixels(width, height, max_pixels)
        check_scans(data, max_scans)  # before libjpeg walks thousands of them (image_header.py)
        if min_side is None or min(width, height) < 2 * min_side:
            return _full_jpeg(data)
    try:
        img = open_image(data, max_pixels)
    except UnknownFormat:
        if data[:2] == JPEG_MAGIC:  # a JPEG Pillow cannot open: libjpeg's error names the cause
            return _full_jpeg(data)
        raise
    with img:
        if img.format == "JPEG":
            return _reduced_jpeg(img, min_side)  # type: ignore[arg-type]
        if img.format == "PNG":
            return _png(data)
        if img.format == "WEBP" and not img.is_animated:  # TorchCodec decodes every frame
            return decode_webp(data, mode="RGB")
        img.load()  # an animated WebP gives its first frame, as a GIF does
        return pil_to_rgb(img)


def decode_jpeg_rgb(data: torch.Tensor) -> torch.Tensor:
    """Decode JPEG bytes (a 1-D uint8 tensor) to a uint8 RGB tensor (3, H, W); TorchCodec
    applies an EXIF orientation, which the JPEGs the engine writes (mode=cache) never carry."""
    return decode_jpeg(data, mode="RGB")


def read_image(
    path: str | os.PathLike[str],
    min_side: int | None = None,
    max_pixels: int | None = PILLOW_MAX_PIXELS,
    max_scans: int | None = MAX_JPEG_SCANS,
) -> torch.Tensor:
    """Read and decode one image file to a uint8 RGB tensor (3, H, W) (see decode_image_bytes);
    only a regular file of a size such an image can have is read (engine/data/safe_read.py)."""
    data = read_regular_file(path, max_file_bytes(max_pixels))
    return decode_image_bytes(data, os.fspath(path), min_side, max_pixels, max_scans)


@contextmanager
def sample_errors(path: str, index: int, label: str | None) -> Iterator[None]:
    """Any failure in the block becomes a `SampleError` naming the file, the sample index and
    its class (`label`; None for an unlabelled input, e.g. of mode=predict), and the fix."""
    try:
        yield
    except Exception as err:  # re-raised with the context the user needs
        too_large = isinstance(err, ImageTooLarge | TooManyScans)
        lead = "Otherwise drop" if too_large else "Fix or remove the file, drop"
        raise SampleError(
            f"cannot decode sample {index}{'' if label is None else f' (class {label!r})'} from "
            f"{shown(path)}: "
            f"{describe_error(err)}. "
            f"{lead} it from the dataset listing, or set dataset.decode.on_error=skip to leave "
            "unreadable files out (listed in bad_samples.csv)."
        ) from err


def load_sample(
    path: str,
    index: int,
    label: str | None,
    min_side: int | None = None,
    max_pixels: int | None = PILLOW_MAX_PIXELS,
    max_scans: int | None = MAX_JPEG_SCANS,
) -> torch.Tensor:
    """`read_image` that turns any failure into a `SampleError` (sample_errors). The datasets
    read their files here: dataset.root -> a listed path -> this -> the safe open
    (engine/docs/engine.md)."""
    with sample_errors(path, index, label):
        data = read_regular_file(path, max_file_bytes(max_pixels))
        return decode_image_bytes(data, path, min_side, max_pixels, max_scans)
