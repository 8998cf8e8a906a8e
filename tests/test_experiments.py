"""Experiment bundles and debug presets compose and run; debug=overfit memorises its batch."""

from __future__ import annotations

import csv
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf

from src.loop import train
from tests.conftest import CONF_DIR

# The template's experiments that run on the demo data (cifar10_resnet18 and mnist_small_cnn
# need torchvision's files: test_builtin.py). Experiments you add are composed below.
DEMO_EXPERIMENTS = [
    "multilabel_csv",
    "sequence_demo",
    "shapes_csv",
    "shapes_imagefolder",
    "shapes_iterable",
    "shapes_tensor",
]
BUNDLES = [
    (g, p.stem) for g in ("experiment", "debug") for p in sorted((CONF_DIR / g).glob("*.yaml"))
]


def _leaves(node: dict[str, Any], prefix: str = "") -> Iterator[tuple[str, Any]]:
    """(dotted key, value) of every value a YAML mapping sets; lists are values."""
    for key, value in node.items():
        if isinstance(value, dict) and value:
            yield from _leaves(value, f"{prefix}{key}.")
        else:
            yield f"{prefix}{key}", value


@pytest.mark.parametrize(("group", "name"), BUNDLES)
def test_every_bundle_applies_its_choices_and_values(demo_dir: Path, group: str, name: str):
    """An experiment or debug preset composes into the options its defaults list picks and every
    value it sets: no other entry of config.yaml's defaults list overrides them."""
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        cfg = compose(
            config_name="config",
            overrides=[f"paths.demo_dir={demo_dir}", f"{group}={name}"],
            return_hydra_config=True,
        )
    bundle = OmegaConf.to_container(OmegaConf.load(CONF_DIR / group / f"{name}.yaml"))
    picks = [e for e in bundle.pop("defaults", []) if isinstance(e, dict)]
    for entry in picks:  # {"override /dataset": "csv"}
        ((key, option),) = entry.items()
        assert cfg.hydra.runtime.choices[key.removeprefix("override").strip(" /")] == option
    composed = OmegaConf.to_container(cfg, resolve=False)  # interpolations as written
    values = list(_leaves(bundle))
    for key, value in values:
        node = composed
        for part in key.split("."):
            node = node[part]
        assert node == value, key
    assert picks or values  # the bundle sets something


def test_one_experiment_per_dataset_kind(make_cfg) -> None:
    kinds = {make_cfg(f"experiment={name}").dataset._target_ for name in DEMO_EXPERIMENTS}
    assert len(kinds) == 5  # imagefolder, csv, tensor, iterable, sequences


@pytest.mark.parametrize("name", DEMO_EXPERIMENTS)
def test_experiment_runs_a_few_batches(make_cfg, name: str) -> None:
    metrics = train(make_cfg(f"experiment={name}", "debug=fast"))
    assert metrics["epochs"] == 1


def test_debug_fast_is_one_short_epoch_in_process(make_cfg) -> None:
    cfg = make_cfg("debug=fast", "loader.num_workers=2")  # command-line values still win
    assert cfg.loader.num_workers == 2 and cfg.trainer.max_epochs == 1
    assert make_cfg("debug=fast").trainer.limit_train_batches == 5


def test_debug_overfit_memorises_one_batch(make_cfg) -> None:
    """The project's default model learns one batch by heart: its loss falls to a fifth of
    the first epoch's or below (small_cnn: under 0.05 from 1.6; the walk-through's tiny one: 0.22;
    a smaller model is slower, so no absolute bound)."""
    cfg = make_cfg("debug=overfit")
    metrics = train(cfg)
    with open(Path(cfg.paths.output_dir) / "history.csv", newline="") as f:
        first = float(next(csv.DictReader(f))["train/loss"])
    assert metrics["train/loss"] < first / 5, (
        f"debug=overfit: the default model's train/loss went from {first:.3f} to "
        f"{metrics['train/loss']:.3f} on one batch (a fifth expected): a model that cannot learn "
        "one batch by heart has a broken model, loss or labels; one that learns slowly needs "
        "more steps (trainer.max_epochs in conf/debug/overfit.yaml)"
    )


def test_debug_profile_writes_a_trace(make_cfg) -> None:
    cfg = make_cfg("debug=profile")
    train(cfg)
    traces = list((Path(cfg.paths.output_dir) / "tensorboard").rglob("*.pt.trace.json"))
    assert len(traces) == 1 and traces[0].stat().st_size > 1000
