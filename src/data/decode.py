"""Decode image files straight to uint8 CHW RGB tensors."""

from __future__ import annotations

import io
import os
import re
import warnings

import numpy as np
import torch
from PIL import Image, ImageOps
from torchvision.io import ImageReadMode, decode_image, decode_jpeg
from torchvision.transforms.v2.functional import resize, to_dtype

# torchvision 0.29 marks its decoders deprecated in favour of TorchCodec, but they stay in the
# pinned release and decode 1.6-2.4x faster than Pillow here (BENCHMARKS.md), so keep them quiet.
TORCHVISION_DECODE_DEPRECATION = "The image decoding and encoding capabilities of TorchVision"
warnings.filterwarnings(
    "ignore", message=TORCHVISION_DECODE_DEPRECATION, category=DeprecationWarning
)

# Formats torchvision.io decodes natively (libjpeg-turbo / libpng / libwebp); others go via Pillow.
_NATIVE_SUFFIXES = (".jpg", ".jpeg", ".png", ".webp")
IMAGE_SUFFIXES = (*_NATIVE_SUFFIXES, ".bmp", ".gif", ".ppm", ".pgm", ".tif", ".tiff")


# torchvision's C++ errors start with "function, /build/path/file.cpp:171, ": noise to a user.
_CPP_LOCATION = re.compile(r"^\S+, \S+\.(?:cpp|h):\d+, ")


class SampleError(RuntimeError):
    """A sample could not be read; the message names the file and the sample index."""


def describe_error(err: BaseException) -> str:
    """The first two sentences of `err`'s first line, without torchvision's source location."""
    text = str(err).strip()
    first = _CPP_LOCATION.sub("", text.splitlines()[0]) if text else type(err).__name__
    return ". ".join(first.split(". ")[:2]).rstrip(".")


def _from_pil(img: Image.Image) -> torch.Tensor:
    """uint8 (3, H, W) from a Pillow image, upright (EXIF orientation) and RGB."""
    rgb = ImageOps.exif_transpose(img).convert("RGB")
    return torch.from_numpy(np.asarray(rgb).copy()).permute(2, 0, 1).contiguous()


def _reduced_jpeg(data: bytes | np.ndarray, min_side: int) -> torch.Tensor | None:
    """A JPEG whose shorter side is at least 2 x `min_side`, decoded at the smallest DCT scale
    (1/2, 1/4 or 1/8: libjpeg's scaled IDCT, via Pillow's draft mode) that keeps the shorter
    side >= `min_side`, then resized to the exact size `Resize(min_side)` gives the full image
    (so a following Resize(min_side) does nothing); None for other images."""
    with Image.open(io.BytesIO(bytes(data))) as img:
        width, height = img.size  # before the EXIF rotation
        if img.format != "JPEG" or min(width, height) < 2 * min_side:
            return None
        img.draft("RGB", (min_side, min_side))  # picks scale = largest of 8, 4, 2 <= short // min
        rgb = ImageOps.exif_transpose(img).convert("RGB")
    # HWC memory seen as CHW: torchvision resizes uint8 fastest in this layout
    image = torch.from_numpy(np.asarray(rgb).copy()).permute(2, 0, 1)
    if (image.shape[1] > image.shape[2]) != (height > width):  # rotated by its EXIF tag
        width, height = height, width
    short, long = sorted((width, height))
    size = (min_side, int(min_side * long / short))  # torchvision's rule for Resize(int)
    return resize(image, list(size if height <= width else size[::-1]), antialias=True)


def decode_image_bytes(
    data: bytes | np.ndarray, name: str, min_side: int | None = None
) -> torch.Tensor:
    """Decode encoded image bytes to a uint8 RGB tensor (3, H, W); `name` picks the decoder.

    With `min_side` (the shorter side the next resize needs), a JPEG at least twice that size
    is decoded at reduced scale and returned as Resize(min_side) of the full image would be.
    """
    if len(data) == 0:
        raise ValueError("the file is empty (0 bytes)")
    if min_side is not None and name.lower().endswith((".jpg", ".jpeg")):
        reduced = _reduced_jpeg(data, min_side)
        if reduced is not None:
            return reduced
    if name.lower().endswith(_NATIVE_SUFFIXES):
        buf = torch.frombuffer(bytearray(data), dtype=torch.uint8)
        image = decode_image(buf, mode=ImageReadMode.RGB, apply_exif_orientation=True)
        # 16-bit PNGs decode to uint16: scale to 8 bits like every other image
        return to_dtype(image, torch.uint8, scale=True) if image.dtype != torch.uint8 else image
    with Image.open(io.BytesIO(bytes(data))) as img:
        return _from_pil(img)


def decode_jpeg_rgb(data: torch.Tensor) -> torch.Tensor:
    """Decode JPEG bytes (a 1-D uint8 tensor) to a uint8 RGB tensor (3, H, W), no EXIF turn."""
    return decode_jpeg(data, mode=ImageReadMode.RGB)


def read_image(path: str | os.PathLike[str], min_side: int | None = None) -> torch.Tensor:
    """Read and decode one image file to a uint8 RGB tensor (3, H, W) (see decode_image_bytes)."""
    with open(path, "rb") as f:
        data = f.read()
    return decode_image_bytes(data, os.fspath(path), min_side)


def load_sample(path: str, index: int, label: str, min_side: int | None = None) -> torch.Tensor:
    """`read_image` that turns any failure into a `SampleError` naming file, index and class."""
    try:
        return read_image(path, min_side)
    except Exception as err:  # re-raised with the context the user needs
        raise SampleError(
            f"cannot decode sample {index} (class {label!r}) from {path}: {describe_error(err)}. "
            "Fix or remove the file, drop it from the dataset listing, or set "
            "dataset.on_error=skip to leave unreadable files out (listed in bad_samples.csv)."
        ) from err
