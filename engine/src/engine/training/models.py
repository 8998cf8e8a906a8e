"""Instantiate the `model` group, filling in what the data decides."""

from __future__ import annotations

import logging
from typing import Any

import torch
from hydra.utils import instantiate
from omegaconf import DictConfig, OmegaConf
from torch import nn

from engine.config.tree import FILLED_FROM_DATA
from engine.data.transforms import Normalizer

log = logging.getLogger(__name__)

# What a builder of pretrained models (engine/models/builders.py) sets on the model it loaded
# weights into: (mean, std, where the weights came from) of the inputs they were trained on.
PRETRAINED_STATS = "pretrained_stats"


def build_model(cfg: DictConfig, **from_data: Any) -> nn.Module:
    """Instantiate `cfg`, passing each key of `from_data` it declares (num_classes, input_shape,
    vocab_size).

    Keys left as `???` take the data's value; a key the user set must agree with the data.
    """
    fills = {}
    for key, value in from_data.items():
        if key not in FILLED_FROM_DATA:
            raise TypeError(f"build_model fills only {FILLED_FROM_DATA}, not {key!r}.")
        if key not in cfg.keys():  # noqa: SIM118 (`key in cfg` is False while it is ???)
            continue
        if value is None:  # the dataset has no such property (e.g. no vocabulary)
            if OmegaConf.is_missing(cfg, key):
                raise ValueError(
                    f"model.{key} is ???, to be taken from the data, but this dataset has no "
                    f"{key}: choose a model that fits the dataset, or set model.{key}."
                )
            continue
        if not OmegaConf.is_missing(cfg, key):
            given = OmegaConf.to_object(cfg[key]) if OmegaConf.is_config(cfg[key]) else cfg[key]
            if given != (list(value) if isinstance(value, tuple) else value):
                raise ValueError(
                    f"model.{key}={given} disagrees with the data ({value}); "
                    f"leave model.{key} as ??? to take it from the dataset."
                )
        fills[key] = value
    return instantiate(cfg, **fills)


def warn_if_normalised_otherwise(model: nn.Module, normalizer: Normalizer) -> None:
    """One warning when `model`'s pretrained weights were trained on inputs normalised with
    another mean or std than this run's transforms give: its features would see shifted
    inputs. Naming both, and the fix."""
    stats = getattr(model, PRETRAINED_STATS, None)
    if stats is None:
        return
    mean, std, source = stats
    ours = (None, None) if normalizer.mean is None else (normalizer.mean, normalizer.std)
    theirs = torch.tensor(mean), torch.tensor(std)
    if ours[0] is not None and ours[0].shape != theirs[0].shape:  # grey inputs: the first
        return  # layer was adapted to them (timm), its statistics are no longer the weights'

    if ours[0] is not None and all(
        a.shape == b.shape and torch.allclose(a, b, atol=1e-3)
        for a, b in zip(ours, theirs, strict=True)
    ):
        return
    shown = "none" if ours[0] is None else f"mean {ours[0].tolist()}, std {ours[1].tolist()}"
    log.warning(
        "the pretrained weights (%s) were trained on inputs normalised with mean %s, std %s; "
        "this run normalises with %s (transforms.mean, transforms.std): use transforms=model, "
        "or set transforms.mean and transforms.std to the model's",
        source,
        list(mean),
        list(std),
        shown,
    )
