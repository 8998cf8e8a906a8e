"""`model.preprocess` of `load_model`: images as a notebook holds them (files, PIL images,
uint8 tensors or numpy arrays channels first or last, one or a list) -> the model's input
batch, through the val transforms and normalisation of the training. One image gives one
batch whatever form it comes in: files are decoded as the training decoded them, PIL images
and arrays converted to RGB as that decoding converts them (16-bit grey scaled by `>> 8`, as
a 16-bit PNG file is). Anything else (an object or float array, no pixels, 5 channels) is
refused in one line naming the image's index and what to give instead."""

from __future__ import annotations

import os
from collections.abc import Sequence

import numpy as np
import torch
from PIL import Image

from engine.data.decode import pil_to_rgb, read_image
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
    _check_shape(tuple(image.shape), index, what)
    if image.shape[-1] in CHANNELS and image.shape[0] not in CHANNELS:
        image = image.permute(2, 0, 1)  # H x W x C, as numpy and PIL keep pixels
    return image.expand(3, -1, -1) if image.shape[0] == 1 else image[:3]


def as_chw(image: ImageLike, index: int) -> torch.Tensor:
    """Image `index` of the input as a uint8 3 x H x W RGB tensor."""
    if isinstance(image, (str, os.PathLike)):
        return read_image(image)
    if isinstance(image, Image.Image):
        if 0 in image.size:
            raise _no_pixels(index, f"a PIL image of size {image.size}")
        return pil_to_rgb(image)
    if isinstance(image, np.ndarray):
        return _from_array(image, index)
    if isinstance(image, torch.Tensor):
        return _from_tensor(image, index)
    raise _refused(index, f"a {type(image).__name__}")


class Preprocess:
    """Images -> the model's input batch: the val transforms of the training, then its
    normalisation."""

    def __init__(self, pipelines: Pipelines) -> None:
        self.pipelines = pipelines

    def __call__(self, images: ImageLike | Sequence[ImageLike]) -> torch.Tensor:
        if (
            isinstance(images, (str, os.PathLike, Image.Image))
            or (isinstance(images, torch.Tensor) and images.ndim == 3)
            or (isinstance(images, np.ndarray) and images.ndim in (2, 3))
        ):
            images = [images]
        val = self.pipelines.val
        chw = [as_chw(image, i) for i, image in enumerate(images)]
        if not chw:
            raise ValueError("model.preprocess: no images given; " + _GIVE + ".")
        batch = torch.stack([val(image) if val is not None else image for image in chw])
        return self.pipelines.normalizer(batch)
