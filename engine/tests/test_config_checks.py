"""The config checker on the reference project: a bad config stops the run before any work
with one short message naming the key (typos, wrong types, inf and nan, values out of their
bounds, `???`, broken `${...}`, targets that do not import), every problem listed. Its types on
their own: a tensor parameter takes numbers and lists and a path takes words; every float and
int knob of the engine's settings dataclasses refuses inf in one line naming the key; only a
parameter whose own default is non-finite takes one. Every option the template's conf/ ships
passing the checker is the template's tests/reliability/test_config_validation.py."""

from __future__ import annotations

import copy
import dataclasses
import math
import os
import typing
from pathlib import Path

import pytest
import torch
from omegaconf import OmegaConf, open_dict

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


def _refused(reference_cfg, *overrides: str) -> str:
    """The ConfigError message for `overrides`, checked to be short and unchained."""
    with pytest.raises(ConfigError) as caught:
        validate_config(reference_cfg("c", *overrides))
    assert caught.value.__cause__ is None and caught.value.__suppress_context__
    return str(caught.value)


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ("loader.batch_size=0", "loader.batch_size=0: expected int >= 1."),
        ("loader.batch_size=-4", "loader.batch_size=-4: expected int >= 1."),
        ("trainer.max_epochs=0", "trainer.max_epochs must be >= 1, got 0."),
        ("loader.batch_size=abc", "loader.batch_size='abc': expected int, got str"),
        ("trainer.max_epochs=1.5", "trainer.max_epochs=1.5: expected int, got float"),
        ("loader.shuffle=[1,2]", "loader.shuffle=[1, 2]: expected bool, got list"),
        ("loader.collate_fn=pad", "loader.collate_fn='pad': expected Callable | None, got str"),
        ("+loader.batchsize=3", "loader.batchsize: unknown key (did you mean loader.batch_size?)"),
        ("optimizer.lr=???", "optimizer.lr=??? is a required value that nothing set"),
        (
            "dataset.root=${paths.nope}",
            "dataset.root=${paths.nope}: the interpolation cannot be "
            "resolved (Interpolation key 'paths.nope' not found)",
        ),
        (
            "dataset._target_=engine.data.datasets.nope.Reader",
            "dataset._target_=engine.data.datasets."
            "nope.Reader: cannot be imported "
            "(ModuleNotFoundError",
        ),
        (
            "model._target_=reference.parts.NoNet",
            "model._target_=reference.parts.NoNet: cannot be imported",
        ),
        (
            "trainer.checkpoint.monitor=val/los",
            "trainer.checkpoint.monitor='val/los' is not a per-epoch value of this run (did "
            "you mean val/loss?)",
        ),
        ("trainer.checkpoint.keep_last=0", "trainer.checkpoint.keep_last=0: expected int >= 1."),
        (
            "trainer.checkpoint.mode=mx",
            "trainer.checkpoint.mode='mx': expected max or min (or null: min for a loss, max "
            "for a metric).",
        ),
        ("trainer.precision=16", "trainer.precision=16: expected one of ['32', 'bf16-mixed'"),
        ("trainer.device=gpu", "trainer.device='gpu': expected auto, cpu, cuda, cuda:N or mps."),
        # a word or a bool for a Tensor-annotated value (SGD's lr: float | Tensor)
        (
            "optimizer.lr=fast",
            "optimizer.lr='fast': expected float | torch.Tensor, got str; set a "
            "number, e.g. optimizer.lr=0.001 (torch.optim.SGD takes lr: ",
        ),
        (
            "optimizer.lr=true",
            "optimizer.lr=True: expected float | torch.Tensor, got bool; set a number",
        ),
        # inf and nan pass every type check and fail only after a step
        ("optimizer.lr=inf", "optimizer.lr=inf: expected a finite number"),
        ("optimizer.lr=nan", "optimizer.lr=nan: expected a finite number"),
        ("optimizer.lr=-inf", "optimizer.lr=-inf: expected a finite number"),
        ("transforms.mean=[0.5,inf,0.5]", "transforms.mean=[0.5, inf, 0.5]: expected a finite"),
        ("optimizer.momentum=nan", "optimizer.momentum=nan: expected a finite number"),
        ("loader.timeout=inf", "loader.timeout=inf: expected a finite number"),
        (
            "trainer.starvation_threshold=-inf",
            "trainer.starvation_threshold=-inf: expected a finite number",
        ),
        (
            "trainer.checkpoint.every_minutes=nan",
            "trainer.checkpoint.every_minutes=nan: expected a finite number",
        ),
        (
            "trainer.checkpoint.every_n_steps=inf",
            "trainer.checkpoint.every_n_steps=inf: expected int, got float; set an int",
        ),
        ("loader.batch_size=nan", "loader.batch_size=nan: expected int, got float"),
        ("benchmark.batches=inf", "benchmark.batches=inf: expected int, got float"),
        ("cache.short_side=inf", "cache.short_side=inf: expected int | None, got float"),
        ("inspect.images=nan", "inspect.images=nan: expected int, got float"),
    ],
)
def test_bad_value_gives_one_short_message(reference_cfg, override: str, message: str) -> None:
    text = _refused(reference_cfg, override)
    assert text.startswith(message), text
    assert len(text.splitlines()) == 1 and "Error in call to target" not in text


@pytest.mark.parametrize(
    ("override", "message"),
    [
        (
            "dataset.decode.max_image_pixels=0",
            "dataset.decode.max_image_pixels=0: expected >= 1 and <= 2",
        ),
        (
            "dataset.decode.max_jpeg_scans=0",
            "dataset.decode.max_jpeg_scans=0: expected >= 1 and <= 2",
        ),
        (
            "dataset=csv dataset.decode.max_jpeg_scans=-1",
            "dataset.decode.max_jpeg_scans=-1: expected >= 1",
        ),
        (
            "dataset.decode.max_bad_fraction=2",
            "dataset.decode.max_bad_fraction=2: expected >= 0 and <= 1",
        ),
        ("optimizer.lr=-1", "optimizer.lr=-1: expected >= 0, e.g. optimizer.lr=0.001"),
        ("+optimizer.weight_decay=-1", "optimizer.weight_decay=-1: expected >= 0"),
        ("optimizer.momentum=-1", "optimizer.momentum=-1: expected >= 0"),
        ("trainer.seed=-1", "trainer.seed=-1: expected >= 0 and <= 4,294,967,295"),
        ("trainer.starvation_threshold=2", "trainer.starvation_threshold=2: expected >= 0"),
        ("inspect.batches=0", "inspect.batches=0: expected >= 1"),
        ("sampler=weighted sampler.num_samples=0", "sampler.num_samples=0: expected >= 1"),
        ("summary.top=-1", "summary.top=-1: expected an int >= 1"),
        ("transforms.train.0.size=0", "transforms.train[0].size=0: expected >= 1"),
        ("loader.prefetch_factor=100000", "loader.prefetch_factor=100000: expected int from 1"),
        ("summary.top=abc", "summary.top='abc': expected an int >= 1"),
    ],
)
def test_a_value_out_of_its_bounds_is_one_line_before_any_work(reference_cfg, override, message):
    """Bounds written in the parameters' type hints (engine/src/engine/core/bounds.py), or torch's own
    for torch.optim, are checked with the config: not at the first batch, deep in torch."""
    text = _refused(reference_cfg, *override.split())
    assert text.startswith(message), text
    assert len(text.splitlines()) == 1


def test_typo_in_an_experiment_yaml(reference_cfg, tmp_path: Path) -> None:
    (tmp_path / "experiment").mkdir()
    (tmp_path / "experiment" / "typo.yaml").write_text(
        "# @package _global_\nmodel:\n  widht: 16  # typo of width\n"
    )
    text = _refused(
        reference_cfg,
        f"hydra.searchpath=[pkg://engine.conf,file://{tmp_path}]",
        "+experiment=typo",
    )
    assert text.startswith("model.widht: unknown key (did you mean model.width?)")


def test_typo_in_a_list_item_names_its_index(reference_cfg) -> None:
    cfg = reference_cfg("c")
    with open_dict(cfg):
        cfg.transforms.train[0].sise = 32
    with pytest.raises(ConfigError, match=r"^transforms\.train\[0\]\.sise: unknown key"):
        validate_config(cfg)


def test_ints_pass_for_floats_and_numbers_for_str(reference_cfg) -> None:
    validate_config(
        reference_cfg("c", "optimizer.lr=1", "trainer.precision=32", "loader.timeout=5")
    )


def test_only_the_keys_the_model_builder_fills_may_stay_missing(reference_cfg) -> None:
    validate_config(reference_cfg("c"))  # TinyNet: num_classes and input_shape are ???
    refused = _refused(reference_cfg, "model.width=???")
    assert refused.startswith("model.width=??? is a required")
    # the data fills the model's keys only: the same names elsewhere are required values
    refused = _refused(reference_cfg, "+dataset.num_classes=???")
    assert refused.startswith("dataset.num_classes=??? is a required")


def test_every_problem_is_listed(reference_cfg) -> None:
    text = _refused(reference_cfg, "+loader.batchsize=3", "trainer.max_epochs=1.5")
    assert text.splitlines()[0].startswith("loader.batchsize: unknown key")
    assert text.splitlines()[1].startswith("trainer.max_epochs=1.5: expected int")
