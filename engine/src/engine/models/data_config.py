"""`transforms=model`: the input size, interpolation, crop fraction, mean and std the chosen
model was pretrained with, as its library states them, with no download (they are known
without the weights): timm's `resolve_data_config` over its pretrained config (what timm's
`resolve_model_data_config` reads off a built model), torchvision's `weights.transforms()`
(the architecture's DEFAULT weights where model.weights is null).

On the uint8 path, as every other transforms group: train is RandomResizedCrop to the size
(in its interpolation, antialiased) and a horizontal flip; val is a resize of the shorter side
to size / crop fraction, then a centre crop to the size (timm's and torchvision's eval
transforms); the normalisation is the model's, once per batch on the device.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Sequence
from typing import Any

from timm.data import resolve_data_config
from timm.models import get_pretrained_cfg
from torchvision.transforms import InterpolationMode, v2

from engine.core.bounds import Fraction
from engine.data.transforms import Pipelines
from engine.models.builders import check_name, weights_member

log = logging.getLogger(__name__)

# The model groups' builders (engine/models/builders.py), by the library they draw on
LIBRARIES = {
    "engine.models.builders.timm_model": "timm",
    "engine.models.builders.torchvision_model": "torchvision",
}


# The model.kwargs key that changes each library's input size (a ViT's positions): where set,
# the pipelines crop to it instead of the pretrained config's size.
SIZE_KWARG = {"timm": "img_size", "torchvision": "image_size"}


def _timm(name: str) -> dict[str, Any]:
    check_name("timm", name)
    cfg = get_pretrained_cfg(name)
    data = resolve_data_config({}, pretrained_cfg=cfg.to_dict() if cfg is not None else {})
    if data.get("crop_mode", "center") != "center":
        raise ValueError(
            f"transforms=model: timm's {name} is evaluated with crop_mode={data['crop_mode']!r}, "
            "which this pipeline does not do (it resizes, then crops the centre): write its "
            "transforms out in a transforms group of your own."
        )
    size = data["input_size"][-1]
    return {
        "size": size,
        "resize": math.floor(size / data["crop_pct"]),  # timm's transforms_factory
        "interpolation": InterpolationMode(data["interpolation"]),
        "mean": list(data["mean"]),
        "std": list(data["std"]),
        "from": f"timm's {cfg.architecture}.{cfg.tag}" if cfg is not None else f"timm's {name}",
    }


def _torchvision(name: str, weights: str | None) -> dict[str, Any]:
    member = weights_member(name, weights or "DEFAULT")
    preset = member.transforms()
    return {
        "size": preset.crop_size[0],
        "resize": preset.resize_size[0],
        "interpolation": preset.interpolation,
        "mean": list(preset.mean),
        "std": list(preset.std),
        "from": f"torchvision's {member}",
    }


def _resized(data: dict[str, Any], size: int | Sequence[int]) -> dict[str, Any]:
    """`data` for input `size` (an int, or [height, width]): the val resize keeps the pretrained
    config's crop fraction (size / resize)."""
    fraction = data["size"] / data["resize"]
    if isinstance(size, int):
        return {**data, "size": size, "resize": math.floor(size / fraction)}
    sides = [int(side) for side in size]
    return {**data, "size": sides, "resize": [math.floor(side / fraction) for side in sides]}


def model_pipelines(
    model: str,
    name: str | None,
    weights: str | None = None,
    kwargs: dict[str, Any] | None = None,
    scale: Sequence[Fraction] = (0.08, 1.0),
    hflip: Fraction = 0.5,
    extra_train: Sequence[Callable[..., Any]] = (),
) -> Pipelines:
    """The train and val pipelines and normalisation of the model `model` (the model group's
    `_target_`) builds as `name` (with torchvision's `weights`, and the input size its
    `kwargs` may set: SIZE_KWARG): RandomResizedCrop of area
    `scale` and a flip with probability `hflip` (0: none), then `extra_train` (e.g.
    TrivialAugmentWide), for train; resize and centre crop for val."""
    library = LIBRARIES.get(model)
    if library is None or name is None:
        raise ValueError(
            f"transforms=model follows a pretrained model's data config, and model {model} has "
            "none: choose model=timm or model=torchvision, or another transforms group."
        )
    data = _timm(name) if library == "timm" else _torchvision(name, weights)
    size_set = (kwargs or {}).get(SIZE_KWARG[library])
    if size_set is not None:
        data = _resized(data, size_set)
    size, interpolation = data["size"], data["interpolation"]
    train: list[Callable[..., Any]] = [
        v2.RandomResizedCrop(size, scale=tuple(scale), interpolation=interpolation, antialias=True)
    ]
    if hflip:
        train.append(v2.RandomHorizontalFlip(hflip))
    val = [
        v2.Resize(data["resize"], interpolation=interpolation, antialias=True),
        v2.CenterCrop(size),
    ]
    log.info(
        "transforms=model: %s's data config: %s px (val: shorter side %s, centre crop %s), %s, "
        "mean %s, std %s",
        data["from"],
        size,
        data["resize"],
        size,
        interpolation.value,
        data["mean"],
        data["std"],
    )
    return Pipelines([*train, *extra_train], val, data["mean"], data["std"])
