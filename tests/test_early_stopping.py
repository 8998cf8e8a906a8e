"""Early stopping on trainer.checkpoint.monitor, resume-safe, and history.csv written as the run
goes (one row per epoch, every metric)."""

from __future__ import annotations

import csv
import logging
import signal
from pathlib import Path

import pytest

from src.loop import train
from src.step import TrainStep

# lr 0 and a model without BatchNorm: val/acc never changes, so epoch 1 stays the best
FLAT = (
    "optimizer.lr=0.0",
    "trainer.max_epochs=6",
    "trainer.early_stopping.patience=2",
    "model=mlp",
    "dataset=tensor",  # 48 train samples: 3 steps per epoch
    "transforms=none",
)


def _history(run: Path) -> list[dict[str, str]]:
    with open(run / "history.csv", newline="") as f:
        return list(csv.DictReader(f))


def test_training_stops_when_the_monitor_stalls(make_cfg, caplog) -> None:
    cfg = make_cfg(*FLAT)
    with caplog.at_level(logging.INFO):
        metrics = train(cfg)
    assert metrics["epochs"] == 3  # best at 1, two epochs without improvement
    # trainer.checkpoint.monitor null: metrics=default's first metric, val/acc
    assert "monitor val/acc (max) picks best.pt and drives early stopping" in caplog.text
    assert "early stopping after epoch 3: val/acc has not improved for 2 epochs" in caplog.text
    rows = _history(Path(cfg.paths.output_dir))
    assert [r["epoch"] for r in rows] == ["1", "2", "3"]
    assert {"val/acc", "val/loss", "train/loss", "train/samples_per_s"} <= rows[0].keys()


def test_without_metrics_early_stopping_follows_the_val_loss(make_cfg, caplog) -> None:
    with caplog.at_level(logging.INFO):
        metrics = train(make_cfg(*FLAT, "~metrics.acc"))  # a metrics group without metrics
    assert metrics["epochs"] == 3
    assert "monitor val/loss (min) picks best.pt and drives early stopping" in caplog.text
    assert "early stopping after epoch 3: val/loss has not improved for 2 epochs" in caplog.text


def test_early_stopping_is_resume_safe(make_cfg, tmp_path, monkeypatch) -> None:
    def run(name: str, *extra: str) -> dict:
        return train(
            make_cfg(
                *FLAT, f"paths.log_dir={tmp_path}", f"paths.output_dir={tmp_path / name}", *extra
            )
        )

    whole = run("whole")
    original = TrainStep.optimizer_step

    def stop_at_step_7(self: TrainStep) -> None:  # epoch 3, after its first batch
        original(self)
        if self.steps == 7:
            signal.raise_signal(signal.SIGTERM)

    monkeypatch.setattr(TrainStep, "optimizer_step", stop_at_step_7)
    with pytest.raises(SystemExit):
        run("first")
    assert len(_history(tmp_path / "first")) == 2  # written as the run went
    monkeypatch.undo()
    resumed = run("second", f"trainer.resume={tmp_path / 'first'}")
    assert resumed["epochs"] == whole["epochs"] == 3
    assert resumed["val/acc"] == whole["val/acc"]
    assert len(_history(tmp_path / "second")) == 3
