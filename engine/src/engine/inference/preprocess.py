"""`model.preprocess` of `load_model`: images as a notebook holds them (files, PIL images,
uint8 tensors or numpy arrays channels first or last, one or a list) -> the model's input
batch, through the val transforms and normalisation of the training. One image gives one
batch whatever form it comes in: files are decoded as the training decoded them (within
load_model's `max_image_pixels` and `max_jpeg_scans`), PIL images and arrays converted to RGB
as that decoding converts them (16-bit grey scaled by `>> 8`, as a 16-bit PNG file is).
Anything else (an object or float array or PIL image, bytes, a meta tensor, no pixels, 5
channels) is refused, and a file that cannot be read reported, in one line naming the image's
index and what to give instead."""

from __future__ import annotations

import os
from collections.abc import Sequence

import numpy as np
import torch
from PIL import Image

from engine.core.text import shown
from engine.data.decode import SampleError, describe_error, pil_to_rgb, read_image
from engine.data.image_header import (
    MAX_JPEG_SCANS,
    PILLOW_MAX_PIXELS,
    ImageTooLarge,
    TooManyScans,
)
from engine.data.transforms import Pipelines

CHANNELS = (1, 3, 4)  # grey, RGB, RGBA
# dtypes an array may have: 8-bit, 1-bit (np.asarray of a mode "1" image), 16-bit grey
ARRAY_DTYPES = (np.uint8, np.bool_, np.uint16)
ImageLike = str | os.PathLike | Image.Image | torch.Tensor | np.ndarray
_GIVE = (
    "give file paths, PIL images or uint8 tensors or arrays C x H x W or H x W x C (a list of "
    "them, or a uint8 batch N x C x H x W)"
)


def _refused(index: int, what: str, fix: str = _GIVE) -> TypeError:
    return TypeError(f"model.preprocess: image {index} is {what}; {fix}.")


def _what(obj: object) -> str:
    """What `obj` is, in a message (bytes are named: they are an encoded file, not pixels)."""
    if isinstance(obj, bytes | bytearray):
        return "encoded bytes (give the file's path, or PIL.Image.open(io.BytesIO(data)))"
    return f"a {type(obj).__name__}"


def _no_pixels(index: int, what: str) -> TypeError:
    return _refused(index, f"{what}, which holds no pixels", "give an image at least 1 x 1")


def _check_shape(shape: tuple[int, ...], index: int, what: str) -> None:
    """Refuse a shape that holds no pixels or has a channel count no decoding gives."""
    if 0 in shape:
        raise _no_pixels(index, f"{what} of shape {shape}")
    if len(shape) == 3 and shape[0] not in CHANNELS and shape[-1] not in CHANNELS:
        raise _refused(
            index,
            f"{what} of shape {shape}, whose first and last axes are no channel count",
            "give 1 (grey), 3 (RGB) or 4 (RGBA) channels, first or last",
        )


def _from_array(image: np.ndarray, index: int) -> torch.Tensor:
    """An H x W (x C) or C x H x W array through PIL, as a PIL image: grey, 16-bit grey and
    RGBA become RGB as the same pixels in a file would."""
    what = f"a numpy {image.dtype} array"
    if image.dtype not in ARRAY_DTYPES or image.ndim not in (2, 3):
        fix = {
            "O": "its items are Python objects, not pixels: give np.asarray(x, dtype=np.uint8)",
            "f": "scale it to 0-255 and give x.astype(np.uint8)",
        }.get(image.dtype.kind, _GIVE)
        raise _refused(index, f"{what} of shape {image.shape}", fix)
    _check_shape(image.shape, index, what)
    if image.ndim == 3 and image.shape[0] in CHANNELS and image.shape[-1] not in CHANNELS:
        image = image.transpose(1, 2, 0)  # C x H x W
    if image.ndim == 3 and image.shape[-1] == 1:
        image = image[..., 0]  # PIL takes grey as H x W
    try:
        picture = Image.fromarray(np.ascontiguousarray(image))
    except TypeError as err:  # e.g. 16-bit colour: PIL has no such mode
        raise _refused(index, f"{what} of shape {image.shape} ({err})", _GIVE) from None
    return pil_to_rgb(picture)


def _from_tensor(image: torch.Tensor, index: int) -> torch.Tensor:
    """A uint8 C x H x W or H x W x C tensor as C x H x W."""
    what = f"a {image.dtype} tensor"
    if image.dtype != torch.uint8 or image.ndim != 3:
        raise _refused(index, f"{what} of shape {tuple(image.shape)}")
    if image.is_meta:  # shapes only: it would pass every step and give a meta batch
        raise _refused(index, f"{what} on the meta device, which holds no pixels")
    _check_shape(tuple(image.shape), index, what)
    if image.shape[-1] in CHANNELS and image.shape[0] not in CHANNELS:
        image = image.permute(2, 0, 1)  # H x W x C, as numpy and PIL keep pixels
    return image.expand(3, -1, -1) if image.shape[0] == 1 else image[:3]


def _from_file(path: str | os.PathLike, index: int, limits: tuple[int | None, ...]) -> torch.Tensor:
    """Image file `path` decoded as the training decoded it; any failure is one SampleError
    naming the index and the file (a limit named as the load_model argument that lifts it)."""
    try:
        return read_image(path, None, *limits)
    except Exception as err:  # re-raised with the index and the file
        cause = err.strerror if isinstance(err, OSError) and err.strerror else describe_error(err)
        if isinstance(err, ImageTooLarge | TooManyScans):
            cause = cause.replace("dataset.decode.", "load_model's ")
        raise SampleError(
            f"model.preprocess: cannot read image {index} from {shown(path)}: {cause}."
        ) from err


def _from_pil(image: Image.Image, index: int) -> torch.Tensor:
    """A PIL image converted to RGB as its file would be (engine.data.decode.pil_to_rgb)."""
    if 0 in image.size:
        raise _no_pixels(index, f"a PIL image of size {image.size}")
    if image.mode == "F":  # float pixels: convert("RGB") clips 0.0-1.0 to black
        raise _refused(
            index,
            f"a PIL image of float mode {image.mode!r}",
            "scale it to 0-255 and give a uint8 array or an image of mode 'L' or 'RGB'",
        )
    if image.mode == "I":  # 32-bit: 16-bit grey (a file reads it `>> 8`) or 8-bit, unknown
        raise _refused(
            index,
            "a PIL image of mode 'I' (32-bit integers: 16-bit or 8-bit grey cannot be told)",
            "give image.convert('I;16') if it holds 16-bit grey (read as a 16-bit PNG is, "
            ">> 8), or image.convert('L') if 8-bit",
        )
    return pil_to_rgb(image)


class Preprocess:
    """Images -> the model's input batch: the val transforms of the training, then its
    normalisation. Files are read within `max_pixels` and `max_scans` (load_model's
    `max_image_pixels` and `max_jpeg_scans`; None: no limit)."""

    def __init__(
        self,
        pipelines: Pipelines,
        max_pixels: int | None = PILLOW_MAX_PIXELS,
        max_scans: int | None = MAX_JPEG_SCANS,
    ) -> None:
        self.pipelines = pipelines
        self.limits = (max_pixels, max_scans)

    def as_chw(self, image: ImageLike, index: int) -> torch.Tensor:
        """Image `index` of the input as a uint8 3 x H x W RGB tensor."""
        if isinstance(image, (str, os.PathLike)):
            return _from_file(image, index, self.limits)
        if isinstance(image, Image.Image):
            return _from_pil(image, index)
        if isinstance(image, np.ndarray):
            return _from_array(image, index)
        if isinstance(image, torch.Tensor):
            return _from_tensor(image, index)
        raise _refused(index, _what(image))

    def __call__(self, images: ImageLike | Sequence[ImageLike]) -> torch.Tensor:
        if (
            isinstance(images, (str, os.PathLike, Image.Image))
            or (isinstance(images, torch.Tensor) and images.ndim == 3)
            or (isinstance(images, np.ndarray) and images.ndim in (2, 3))
        ):
            images = [images]
        elif not isinstance(images, list | tuple) and not (
            isinstance(images, torch.Tensor | np.ndarray) and images.ndim == 4
        ):  # None, a dict (its keys), bytes (its ints), a 0-d tensor: no images
            shape = f" of shape {tuple(images.shape)}" if hasattr(images, "shape") else ""
            raise TypeError(f"model.preprocess: the input is {_what(images)}{shape}; {_GIVE}.")
        val = self.pipelines.val
        chw = [self.as_chw(image, i) for i, image in enumerate(images)]
        if not chw:
            raise ValueError("model.preprocess: no images given; " + _GIVE + ".")
        batch = torch.stack([val(image) if val is not None else image for image in chw])
        return self.pipelines.normalizer(batch)
