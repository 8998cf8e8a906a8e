"""The config checker's types on their own: a tensor parameter takes numbers and lists and a
path takes words; every float and int knob of the engine's settings dataclasses refuses inf
in one line naming the key; only a parameter whose own default is non-finite takes one."""

from __future__ import annotations

import copy
import dataclasses
import math
import os
import typing
from pathlib import Path

import pytest
import torch
from omegaconf import OmegaConf

from engine.config.errors import ConfigError
from engine.config.schema import accepts, is_numeric, node_problems
from engine.config.validate import validate_config
from engine.data.loader_settings import LoaderSettings
from engine.modes.benchmark import BenchmarkSettings
from engine.modes.cache import CacheSettings
from engine.modes.inspect import InspectSettings
from engine.training.settings import CheckpointSettings, TrainerSettings


def test_a_tensor_takes_numbers_and_lists_and_a_path_takes_words() -> None:
    assert accepts(torch.Tensor, 0.1) and accepts(torch.Tensor, 3) and accepts(torch.Tensor, [1.0])
    assert not accepts(torch.Tensor, "fast") and not accepts(torch.Tensor, True)
    assert accepts(float | torch.Tensor, 1e-3) and not accepts(float | torch.Tensor, "fast")
    for path_like in (Path, str | Path, os.PathLike, str | os.PathLike | None):
        assert accepts(path_like, "data/train")


def test_every_settings_dataclass_refuses_non_finite_floats(reference_cfg) -> None:
    """Each float field of a settings dataclass, set to inf: one line naming the key."""
    groups = {
        "loader": LoaderSettings,
        "trainer": TrainerSettings,
        "trainer.checkpoint": CheckpointSettings,
        "benchmark": BenchmarkSettings,
        "cache": CacheSettings,
        "inspect": InspectSettings,
    }
    checked, base = 0, reference_cfg("c")  # composed once; each case sets its value in a copy
    for group, settings in groups.items():
        hints = typing.get_type_hints(settings)
        for field in dataclasses.fields(settings):
            if is_numeric(hints[field.name]):
                key = f"{group}.{field.name}"
                cfg = copy.deepcopy(base)
                OmegaConf.update(cfg, key, math.inf)
                with pytest.raises(ConfigError) as caught:
                    validate_config(cfg)
                lines = str(caught.value).splitlines()
                # one line per key holding the value (trainer.seed is also sampler.seed)
                assert any(line.startswith(f"{key}=inf: expected ") for line in lines), lines
                assert all("=inf: expected " in line for line in lines), lines
                checked += 1
    assert checked >= 15  # every int and float knob of the six


def test_a_non_finite_default_allows_non_finite_values() -> None:
    """Only a parameter whose own default is inf or nan takes one (none in conf/ does)."""

    class Clip:
        def __init__(self, limit: float = math.inf, scale: float = 1.0) -> None:
            self.limit, self.scale = limit, scale

    problems = node_problems("clip", {"limit": math.inf, "scale": 2.0}, "x.Clip", Clip)
    assert problems == []
    problems = node_problems("clip", {"limit": math.inf, "scale": math.nan}, "x.Clip", Clip)
    assert len(problems) == 1 and problems[0].startswith("clip.scale=nan: expected a finite")
