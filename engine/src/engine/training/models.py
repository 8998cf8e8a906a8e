"""Instantiate the `model` group, filling in what the data decides."""

from __future__ import annotations

from typing import Any

from hydra.utils import instantiate
from omegaconf import DictConfig, OmegaConf
from torch import nn

from engine.config.tree import FILLED_FROM_DATA


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
