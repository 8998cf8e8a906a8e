"""A helper's attack on the sweep's noise and TensorBoard's groups: sample counts are sizes,
never curves, epoch-line figures or rankings; HParams columns name the tags the scalars drew;
an older sweep's summary.csv, resumed, keeps every cell under its own column; a lone job or
k-fold folds are not compared."""

from __future__ import annotations

import csv
from pathlib import Path

from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
from tensorboard.plugins.hparams.plugin_data_pb2 import HParamsPluginData

from engine.config.validate import mode_problems
from engine.runs.tensorboard import TensorBoardLogger
from engine.sweeps.summary import notes
from engine.sweeps.table import append_row, mark_tied, rank, read_rows
from engine.training.progress import epoch_line


def test_hparams_columns_name_the_tags_the_scalars_drew(tmp_path: Path) -> None:
    """mode=benchmark passes its metric keys (pipeline/read_ms): the columns are ~pipeline/."""
    with TensorBoardLogger(tmp_path) as board:
        board.scalars({"loader/samples_per_s": 10.0, "pipeline/read_ms": 1.0, "epoch": 1}, 0)
        board.hparams({"loader.batch_size": 8}, ["loader/samples_per_s", "pipeline/read_ms"])
    events = EventAccumulator(str(tmp_path))
    events.Reload()
    assert set(events.Tags()["scalars"]) == {"loader/samples_per_s", "~pipeline/read_ms"}
    content = events.PluginTagToContent("hparams")["_hparams_/experiment"]
    infos = HParamsPluginData.FromString(content).experiment.metric_infos
    assert [m.name.tag for m in infos] == ["loader/samples_per_s", "~pipeline/read_ms"]


def test_sample_counts_are_no_epoch_figure_and_no_ranking() -> None:
    metrics = {
        "train/loss": 1.0,
        "val/loss": 1.0,
        "val/acc": 0.5,
        "val/ema_acc": 0.5,
        "val/samples": 64,
        "val/ema_samples": 64,
        "train/samples_per_s": 100.0,
        "train/data_wait_frac": 0.1,
    }
    line = epoch_line(1, 2, metrics)
    assert "samples 64" not in line and "val/ema_acc 0.5000" in line
    refused = mode_problems({"mode": "train", "summary": {"rank_by": "val/samples"}})
    assert refused and refused[0].startswith("summary.rank_by='val/samples' is not a metric")
    assert "'val/samples'" not in refused[0].split("use one of")[1]


def test_an_older_summary_csv_resumed_keeps_every_cell_under_its_column(tmp_path: Path) -> None:
    path = tmp_path / "summary.csv"
    old = ["job", "status", "val/acc", "train/loss"]
    append_row(path, old, {"job": 0, "status": "ok", "val/acc": 0.2, "train/loss": 1.5})
    new = ["job", "status", "val/acc", "val/samples", "train/loss", "tied"]
    row = {"job": 1, "status": "ok", "val/acc": 0.3, "val/samples": 64, "train/loss": 1.4}
    append_row(path, new, row)
    rows = read_rows(path)
    assert rows[1]["train/loss"] == "1.4" and rows[1]["val/samples"] == "64"
    assert rows[0]["train/loss"] == "1.5" and rows[0]["val/samples"] == ""
    with open(path, newline="") as f:
        assert next(csv.reader(f)) == [*old, "val/samples", "tied"]


def _rows(*shares: float) -> list[dict[str, str]]:
    return [
        {"job": str(i), "status": "ok", "overrides": "", "val/acc": str(s), "val/samples": "450"}
        for i, s in enumerate(shares)
    ]


def test_a_lone_job_or_k_fold_folds_are_not_compared() -> None:
    assert notes(mark_tied(rank(_rows(0.9), "val/acc"), "val/acc"), "val/acc") == []
    folds = mark_tied(rank(_rows(0.9, 0.89, 0.88), "val/acc"), "val/acc")
    assert notes(folds, "val/acc", folds=True) == []
