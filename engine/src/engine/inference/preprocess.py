"""`model.preprocess` of `load_model`: images as a notebook holds them (files, PIL images,
uint8 tensors or numpy arrays channels first or last, one or a list) -> the model's input
batch, through the val transforms and normalisation of the training. One image gives one
batch whatever form it comes in: files are decoded as the training decoded them, PIL images
converted to RGB as that decoding does."""

from __future__ import annotations

import os
from collections.abc import Sequence

import numpy as np
import torch
from PIL import Image
from torchvision.transforms.v2.functional import pil_to_tensor

from engine.data.decode import read_image
from engine.data.transforms import Pipelines

CHANNELS = (1, 3, 4)  # grey, RGB, RGBA
ImageLike = str | os.PathLike | Image.Image | torch.Tensor | np.ndarray


def as_chw(image: ImageLike, index: int) -> torch.Tensor:
    """Image `index` of the input as a uint8 C x H x W tensor."""
    if isinstance(image, (str, os.PathLike)):
        return read_image(image)
    if isinstance(image, Image.Image):
        return pil_to_tensor(image.convert("RGB"))
    if isinstance(image, np.ndarray):  # H x W (x C), as imageio and np.asarray(pil) give them
        if image.ndim == 3 and image.shape[0] in CHANNELS and image.shape[-1] not in CHANNELS:
            image = image.transpose(1, 2, 0)  # C x H x W
        try:  # through PIL, as a PIL image: grey, palette and RGBA become RGB alike
            return pil_to_tensor(Image.fromarray(np.ascontiguousarray(image)).convert("RGB"))
        except (TypeError, ValueError):
            image = torch.from_numpy(np.array(image))  # refused below, naming its dtype/shape
    if not isinstance(image, torch.Tensor) or image.dtype != torch.uint8 or image.ndim != 3:
        kind = (
            f"a {image.dtype} tensor of shape {tuple(image.shape)}"
            if isinstance(image, torch.Tensor)
            else f"a {type(image).__name__}"
        )
        raise TypeError(
            f"model.preprocess: image {index} is {kind}; give file paths, PIL images or uint8 "
            "tensors or arrays C x H x W or H x W x C (a list of them, or a uint8 batch N x C x "
            "H x W)."
        )
    if image.shape[-1] in CHANNELS and image.shape[0] not in CHANNELS:
        return image.permute(2, 0, 1)  # H x W x C, as numpy and PIL keep pixels
    return image


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
        batch = torch.stack([val(image) if val is not None else image for image in chw])
        return self.pipelines.normalizer(batch)
