"""Multi-label training as conf/ composes it: loss=bce, metrics=multilabel against
hand-computed values and torchmetrics, the refusals of mismatched losses and metrics, and
training on multi-hot data. The engine's CsvDataset parsing rows into multi-hot targets (every
bad row refused with its file, line and key) is the engine's suite's
(engine/tests/test_multilabel_csv.py)."""

from __future__ import annotations

import csv
import json
import logging
from pathlib import Path

import numpy as np
import pytest
import torch
from omegaconf import OmegaConf
from torchmetrics.functional.classification import (
    multilabel_average_precision,
    multilabel_exact_match,
    multilabel_f1_score,
)

from engine.api import MapDataset
from engine.config.errors import ConfigError
from engine.data.datasets.csv import CsvDataset
from engine.training.totals import PassTotals, sum_states
from engine_dev.small_sets import random_rows, write_listing
from src.loop import train
from src.losses.bce import BCE
from src.metrics.multilabel import F1, MeanAveragePrecision, SubsetAccuracy
from tests.cli import run_cli
from tests.conftest import compose_config


def listed(folder: Path, rows: list[tuple[str, str, str]], **keys) -> CsvDataset:
    listing = write_listing(folder, rows)
    return CsvDataset("train", csv=str(listing), label_column="labels", multi_label=True, **keys)


def random_rows_tensors(n: int, classes: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(seed)
    logits = torch.randn(n, classes, generator=generator) * 2
    labels = (torch.rand(n, classes, generator=generator) < 0.4).float()
    return logits, labels


def test_metrics_equal_hand_computed_values() -> None:
    # scores (sigmoid) per class; class 0 ranks its 2 positives 1st and 3rd: AP (1 + 2/3) / 2
    scores = torch.tensor([[0.9, 0.8], [0.7, 0.6], [0.4, 0.3], [0.2, 0.1]])
    labels = torch.tensor([[1, 0], [0, 1], [1, 1], [0, 0]], dtype=torch.float32)
    logits = torch.logit(scores)
    assert MeanAveragePrecision().value(logits, labels) == pytest.approx(
        ((1 + 2 / 3) / 2 + (1 / 2 + 2 / 3) / 2) / 2, abs=1e-6
    )
    # at 0.5: class 0 predicts rows 0,1 (tp 1, fp 1, fn 1): F1 1/2; class 1 rows 0,1 (tp 1,
    # fp 1, fn 1): 1/2. Every class right: row 3 only.
    assert F1(0.5).value(logits, labels) == pytest.approx(0.5, abs=1e-6)
    assert SubsetAccuracy(0.5).value(logits, labels) == pytest.approx(0.25, abs=1e-6)
    assert SubsetAccuracy(0.95).value(logits, labels) == pytest.approx(0.25, abs=1e-6)
    at_half = torch.tensor([[0.0, 1.0]])  # a score exactly at the threshold is not a label
    assert SubsetAccuracy(0.5).value(at_half, torch.tensor([[1.0, 1.0]])) == 0.0  # as torchmetrics


def test_metrics_over_a_pass_in_batches_match_torchmetrics_on_the_whole() -> None:
    logits, labels = random_rows_tensors(203, 5, seed=1)
    metrics = {"map": MeanAveragePrecision(), "f1": F1(0.3), "subset_acc": SubsetAccuracy(0.3)}
    totals = PassTotals(torch.device("cpu"), metrics)
    for start in range(0, len(logits), 16):
        part = slice(start, start + 16)
        totals.add(torch.tensor(0.0), logits[part], labels[part])
    means = totals.means("val", "")
    probs, target = logits.sigmoid(), labels.int()
    expected = {
        "val/map": multilabel_average_precision(probs, target, num_labels=5, average="macro"),
        "val/f1": multilabel_f1_score(probs, target, num_labels=5, threshold=0.3),
        "val/subset_acc": multilabel_exact_match(probs, target, num_labels=5, threshold=0.3),
    }
    for key, value in expected.items():
        assert means[key] == pytest.approx(value.item(), abs=1e-6), key


def test_a_resumed_pass_keeps_its_rows_and_ranks_rows_merge() -> None:
    logits, labels = random_rows_tensors(60, 4, seed=2)
    whole = PassTotals(torch.device("cpu"), {"map": MeanAveragePrecision()})
    whole.add(torch.tensor(1.0), logits, labels)
    halves = []
    for part in (slice(0, 25), slice(25, 60)):  # two ranks' mid-epoch checkpoints
        totals = PassTotals(torch.device("cpu"), {"map": MeanAveragePrecision()})
        totals.add(torch.tensor(1.0), logits[part], labels[part])
        halves.append(totals.state_dict())
    resumed = PassTotals(torch.device("cpu"), {"map": MeanAveragePrecision()})
    resumed.load_state_dict(sum_states(halves))
    assert resumed.samples == 60
    assert resumed.means("train", "")["train/map"] == whole.means("train", "")["train/map"]


def test_pos_weight_balanced_is_negatives_over_positives(tmp_path: Path) -> None:
    rows = [("img/0.png", "red", "train"), ("img/1.png", "red|green", "train"),
            ("img/2.png", "red", "train"), ("img/3.png", "", "train")]  # fmt: skip
    data = listed(tmp_path, rows)  # classes green, red: 1 and 3 positives of 4
    assert BCE(data, "balanced").pos_weight.tolist() == pytest.approx([3.0, 1 / 3])
    with pytest.raises(ValueError, match=r"loss.pos_weight=\[1.0\]: expected null, balanced or 2"):
        BCE(data, [1.0])
    logits = torch.zeros(4, 2)
    loss = BCE(data, [2.0, 1.0])(logits, torch.tensor(data.targets, dtype=torch.float32))
    assert loss.item() == pytest.approx(np.log(2) * (1 * 2 + 3 + 4) / 8, rel=1e-6)


def multi_label_cfg(tmp_path: Path, *overrides: str):
    listing = write_listing(tmp_path / "data", random_rows(48))
    return compose_config(
        tmp_path / "data",
        tmp_path / "run",
        "dataset=csv",
        f"dataset.csv={listing}",
        "dataset.multi_label=true",
        "dataset.label_column=labels",
        "loss=bce",
        "metrics=multilabel",
        "model=mlp",
        "transforms=none",
        *overrides,
    )


REFUSED = [
    (["loss=cross_entropy"], "use loss=bce"),
    (["metrics=default"], "use metrics=multilabel"),
]


@pytest.mark.parametrize(("overrides", "fix"), REFUSED)
def test_single_label_losses_and_metrics_are_refused_on_multi_hot_data(
    tmp_path: Path, overrides: list[str], fix: str
) -> None:
    with pytest.raises(ConfigError, match=fix) as err:
        train(multi_label_cfg(tmp_path, *overrides))
    assert "\n" not in str(err.value)


def test_the_config_check_refuses_a_mismatch_before_reading_any_data(tmp_path: Path) -> None:
    result = run_cli(
        "dataset=csv",
        f"dataset.csv={tmp_path / 'not_written_yet.csv'}",
        "dataset.multi_label=true",
        f"hydra.run.dir={tmp_path / 'run'}",
        cwd=tmp_path,
    )
    assert result.returncode == 1
    lines = [line for line in result.stderr.splitlines() if "use loss=bce" in line]
    assert len(lines) == 1 and "does not exist" not in result.stderr  # no listing read


def test_multi_label_losses_and_metrics_are_refused_on_single_label_data(make_cfg) -> None:
    with pytest.raises(ConfigError, match=r"use loss=cross_entropy, or set dataset\.multi_label"):
        train(make_cfg("loss=bce", "trainer.max_epochs=1"))
    with pytest.raises(ConfigError, match="use metrics=default"):
        train(make_cfg("metrics=multilabel"))


def test_training_on_multi_label_data_logs_and_keeps_the_best_val_map(
    tmp_path: Path, caplog
) -> None:
    # metrics=multilabel and no trainer.checkpoint.monitor: best.pt follows val/map
    cfg = multi_label_cfg(
        tmp_path, "trainer.max_epochs=4", "optimizer.lr=0.01", "trainer.early_stopping.patience=3"
    )
    assert cfg.trainer.checkpoint.monitor is None
    with caplog.at_level(logging.INFO, logger="engine.runs.training_run"):
        metrics = train(cfg)
    assert (
        "monitor val/map (max) picks best.pt and drives early stopping: the metrics group's "
        "first metric (trainer.checkpoint.monitor=null)" in caplog.text
    )
    run = tmp_path / "run"
    saved_checkpoint = OmegaConf.load(run / "config_resolved.yaml").trainer.checkpoint
    assert (saved_checkpoint.monitor, saved_checkpoint.mode) == ("val/map", "max")
    history = list(csv.DictReader((run / "history.csv").open()))
    maps = [float(h["val/map"]) for h in history]
    saved = json.loads((run / "metrics.json").read_text())
    assert saved["val/best_map"] == pytest.approx(max(maps)) == metrics["val/best_map"]
    for key in ("val/f1", "val/subset_acc", "train/map", "train/f1", "train/subset_acc"):
        assert key in history[0]
    assert maps[-1] > 0.8  # three coloured patches: learnable in a few epochs
    best = torch.load(run / "checkpoints" / "best.pt", weights_only=False)
    assert best["epoch"] == 1 + maps.index(max(maps))
    assert best["best"] == pytest.approx(max(maps))  # ranked by val/map's own values


class TaggedFeatures(MapDataset):
    """A dataset of your own under the contract: features whose signs are the labels."""

    multi_label = True

    def __init__(self, split: str, transform=None, classes=None, size: int = 64) -> None:
        generator = torch.Generator().manual_seed(0 if split == "train" else 1)
        self.features = torch.randn(size, 3, generator=generator)
        self.targets = (self.features > 0).numpy().astype(np.uint8)
        self.classes = list(classes or ["x", "y", "z"])

    def __len__(self) -> int:
        return len(self.features)

    def __getitem__(self, index: int) -> tuple[torch.Tensor, torch.Tensor]:
        return self.features[index], torch.from_numpy(self.targets[index].astype(np.float32))


def test_a_dataset_of_your_own_trains_multi_label_through_the_contract(tmp_path: Path) -> None:
    cfg = compose_config(
        tmp_path,
        tmp_path / "run",
        "loss=bce",
        "metrics=multilabel",
        "trainer.checkpoint.monitor=val/map",
        "model=mlp",
        "transforms=none",
        "trainer.max_epochs=3",
        "optimizer.lr=0.05",
    )
    cfg.dataset = OmegaConf.create({"_target_": f"{__name__}.TaggedFeatures"})
    assert train(cfg)["val/map"] > 0.9
