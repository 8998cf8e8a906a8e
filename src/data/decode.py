"""Decode image files straight to uint8 CHW RGB tensors."""

from __future__ import annotations

import io
import os
import re
import warnings

import numpy as np
import torch
from PIL import Image, ImageOps
from torchvision.io import ImageReadMode, decode_image
from torchvision.transforms.v2.functional import to_dtype

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


def decode_image_bytes(data: bytes | np.ndarray, name: str) -> torch.Tensor:
    """Decode encoded image bytes to a uint8 RGB tensor (3, H, W); `name` picks the decoder."""
    if len(data) == 0:
        raise ValueError("the file is empty (0 bytes)")
    if name.lower().endswith(_NATIVE_SUFFIXES):
        buf = torch.frombuffer(bytearray(data), dtype=torch.uint8)
        image = decode_image(buf, mode=ImageReadMode.RGB, apply_exif_orientation=True)
        # 16-bit PNGs decode to uint16: scale to 8 bits like every other image
        return to_dtype(image, torch.uint8, scale=True) if image.dtype != torch.uint8 else image
    with Image.open(io.BytesIO(bytes(data))) as img:
        rgb = ImageOps.exif_transpose(img).convert("RGB")
        return torch.from_numpy(np.asarray(rgb).copy()).permute(2, 0, 1).contiguous()


def read_image(path: str | os.PathLike[str]) -> torch.Tensor:
    """Read and decode one image file to a uint8 RGB tensor (3, H, W)."""
    with open(path, "rb") as f:
        data = f.read()
    return decode_image_bytes(data, os.fspath(path))


def load_sample(path: str, index: int, label: str) -> torch.Tensor:
    """`read_image` that turns any failure into a `SampleError` naming file, index and class."""
    try:
        return read_image(path)
    except Exception as err:  # re-raised with the context the user needs
        raise SampleError(
            f"cannot decode sample {index} (class {label!r}) from {path}: {describe_error(err)}. "
            "Fix or remove the file, drop it from the dataset listing, or set "
            "dataset.on_error=skip to leave unreadable files out (listed in bad_samples.csv)."
        ) from err
