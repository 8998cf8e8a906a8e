"""Experiment bundles and debug presets compose and run; debug=overfit memorises its batch."""

from __future__ import annotations

from pathlib import Path

import pytest

from src.modes.train import train
from tests.conftest import CONF_DIR

# The template's experiments that run on the demo data (cifar10_resnet18 and mnist_small_cnn
# need torchvision's files: test_builtin.py). Experiments you add are composed below.
DEMO_EXPERIMENTS = [
    "sequence_demo", "shapes_csv", "shapes_imagefolder", "shapes_iterable", "shapes_tensor",
]  # fmt: skip
ALL_EXPERIMENTS = sorted(p.stem for p in (CONF_DIR / "experiment").glob("*.yaml"))


@pytest.mark.parametrize("name", ALL_EXPERIMENTS)
def test_every_experiment_composes(make_cfg, name: str) -> None:
    assert make_cfg(f"experiment={name}").trainer.max_epochs >= 1


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
    metrics = train(make_cfg("debug=overfit"))
    assert metrics["train/loss"] < 0.05, metrics


def test_debug_profile_writes_a_trace(make_cfg) -> None:
    cfg = make_cfg("debug=profile")
    train(cfg)
    traces = list((Path(cfg.paths.output_dir) / "tensorboard").rglob("*.pt.trace.json"))
    assert len(traces) == 1 and traces[0].stat().st_size > 1000
