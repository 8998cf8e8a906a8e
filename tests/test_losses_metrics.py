"""The loss and metrics groups: class weights, label smoothing, top-k accuracy; mode=eval
reports the metrics group's values of the training's best checkpoint."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from torch.nn import functional as F

from engine_dev.api import Labels, load_checkpoint
from src.loop import train
from src.losses.cross_entropy import CrossEntropy
from src.metrics.accuracy import Accuracy
from tests.cli import run_cli

LOGITS = torch.tensor([[2.0, 1.0, 0.0], [0.0, 2.0, 1.0], [1.0, 0.0, 2.0], [2.0, 0.0, 1.0]])
LABELS = torch.tensor([0, 2, 1, 2])


def test_balanced_class_weights_are_inverse_counts_with_mean_one() -> None:
    loss = CrossEntropy(Labels([0, 0, 0, 1], 2), class_weights="balanced")
    assert torch.allclose(loss.weight, torch.tensor([0.5, 1.5]))
    expected = F.cross_entropy(LOGITS[:, :2], LABELS.clamp(max=1), weight=loss.weight)
    assert torch.allclose(loss(LOGITS[:, :2], LABELS.clamp(max=1)), expected)


def test_plain_and_smoothed_losses_are_torchs() -> None:
    data = Labels([0, 1, 2], 3)
    assert torch.allclose(CrossEntropy(data)(LOGITS, LABELS), F.cross_entropy(LOGITS, LABELS))
    smoothed = CrossEntropy(data, label_smoothing=0.1)(LOGITS, LABELS)
    assert torch.allclose(smoothed, F.cross_entropy(LOGITS, LABELS, label_smoothing=0.1))


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"class_weights": [1.0, 2.0]}, r"loss\.class_weights=\[1\.0, 2\.0\]: expected null"),
        ({"class_weights": "rare"}, r"loss\.class_weights='rare'"),
        ({"label_smoothing": 1.0}, r"loss\.label_smoothing=1\.0"),
    ],
)
def test_bad_loss_settings_name_the_key(kwargs: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        CrossEntropy(Labels([0, 1, 2], 3), **kwargs)


def test_top_k_accuracy_over_batches() -> None:
    """The metric's sums over two batches give the share whose label is in the top k."""
    for k, expected in ((1, 0.25), (2, 0.75)):
        metric = Accuracy(k=k)
        sums = metric.sums(torch.device("cpu"))
        metric.update(sums, LOGITS[:2], LABELS[:2])
        metric.update(sums, LOGITS[2:], LABELS[2:])
        assert metric.value(sums, len(LABELS)) == expected


def test_a_metric_added_by_config_is_reported_for_train_and_val(make_cfg) -> None:
    cfg = make_cfg(
        "trainer.max_epochs=1",
        "+metrics.top2={_target_:src.metrics.accuracy.Accuracy,k:2}",
        "loss.label_smoothing=0.1",
        "loss.class_weights=balanced",
    )
    train(cfg)
    last = load_checkpoint(Path(cfg.paths.output_dir) / "checkpoints" / "last.pt")
    epoch = last["history"][0]
    assert {"train/acc", "train/top2", "val/acc", "val/top2"} <= set(epoch)
    assert epoch["val/top2"] >= epoch["val/acc"]  # the label among the 2 best: at least top-1


def test_balanced_weights_need_labels() -> None:
    unlabelled = Labels([0, 1], 2)
    unlabelled.targets = None
    with pytest.raises(ValueError, match="class_weights=balanced needs per-sample labels"):
        CrossEntropy(unlabelled, class_weights="balanced")


def test_eval_reports_the_metrics_of_the_trainings_best_checkpoint(demo_dir, tmp_path) -> None:
    """mode=eval rebuilds this project's metrics from the checkpoint alone: its val/acc and
    val/top2 are the best epoch's as training measured them (the engine suite proves the loss
    and the reports on its own reference project)."""
    top2 = "+metrics.top2={_target_:src.metrics.accuracy.Accuracy,k:2}"
    data = (f"paths.demo_dir={demo_dir}", f"paths.log_dir={tmp_path}", top2)
    trained = run_cli(
        *data, "trainer.max_epochs=2", f"hydra.run.dir={tmp_path / 'run'}", cwd=tmp_path
    )
    assert trained.returncode == 0, trained.stderr[-3000:]
    metrics = json.loads((tmp_path / "run" / "metrics.json").read_text())
    at_best = load_checkpoint(tmp_path / "run" / "checkpoints" / "best.pt")["history"][-1]
    assert at_best["val/acc"] == metrics["val/best_acc"]  # best.pt: saved at its epoch's end
    run = ("mode=eval", f"eval.checkpoint={tmp_path / 'run'}", f"hydra.run.dir={tmp_path / 'eval'}")
    evaluated = run_cli(*data, *run, cwd=tmp_path)
    assert evaluated.returncode == 0, evaluated.stderr[-3000:]
    written = json.loads((tmp_path / "eval" / "metrics.json").read_text())
    assert written["val/acc"] == metrics["val/best_acc"]
    assert written["val/top2"] == at_best["val/top2"]
