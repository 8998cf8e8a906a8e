"""k-fold cross-validation as conf/ runs it: +sweep=kfold's mean ± std rows (with the metrics
group's columns, fold.json, summary.md and the plot), a failed fold said in the row, folds set
on a stream refused. The folds themselves, their refusals, fold.json and the fold groups are
the engine's suite's (engine/tests/test_kfold.py)."""

from __future__ import annotations

import csv
import json
import statistics
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from engine.data.folds import FOLD_FILE
from engine.sweeps.folds import MEAN_STD
from tests.cli import run_cli

ROOT = Path(__file__).resolve().parents[1]


def test_folds_set_on_a_stream_get_the_streams_refusal(demo_dir: Path, tmp_path: Path) -> None:
    result = run_cli(
        "dataset=iterable",
        "dataset.folds=5",  # every dataset node has the fold keys (engine/conf/folds.yaml)
        f"paths.demo_dir={demo_dir}",
        f"hydra.run.dir={tmp_path / 'run'}",
        cwd=ROOT,
    )
    assert result.returncode == 1 and "is a stream, whose samples" in result.stderr


def _kfold_sweep(
    demo_dir: Path, tmp_path: Path, folds: str, *args: str
) -> tuple[int, str, list[dict]]:
    result = run_cli(
        "-m",
        *args,
        "+sweep=kfold",
        "dataset.folds=3",
        f"dataset.fold={folds}",
        "model=mlp",
        "trainer.max_epochs=1",
        "loader.batch_size=16",
        "loader.num_workers=0",
        f"paths.demo_dir={demo_dir}",
        f"paths.log_dir={tmp_path}",
        f"hydra.sweep.dir={tmp_path / 'sweep'}",
        cwd=ROOT,
    )
    with open(tmp_path / "sweep" / "summary.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    return result.returncode, result.stdout + result.stderr, rows


def test_kfold_sweep_adds_a_mean_and_std_row(demo_dir: Path, tmp_path: Path) -> None:
    top2 = ["+metrics.top2._target_=src.metrics.accuracy.Accuracy", "+metrics.top2.k=2"]
    code, output, rows = _kfold_sweep(demo_dir, tmp_path, "0,1,2", *top2)
    assert code == 0, output[-3000:]
    jobs = [r for r in rows if r["status"] == "ok"]
    (group,) = [r for r in rows if r["status"] == MEAN_STD]
    assert group["folds"] == "3 of 3" and "dataset.fold=" not in group["overrides"]
    accs = [float(r["val/acc"]) for r in jobs]
    assert float(group["val/acc"]) == pytest.approx(statistics.fmean(accs))
    assert float(group["val/acc_std"]) == pytest.approx(statistics.stdev(accs))
    top2 = [float(r["val/top2"]) for r in jobs]  # the columns follow the metrics group
    assert (
        float(group["val/top2"]) == pytest.approx(statistics.fmean(top2)) and group["val/top2_std"]
    )
    folds = [json.loads(Path(r["dir"], FOLD_FILE).read_text()) for r in jobs]
    assert sorted(i for f in folds for i in f["val_indices"]) == list(range(48))
    summary = (tmp_path / "sweep" / "summary.md").read_text()
    assert "## k-fold cross-validation" in summary
    assert f"| 3 of 3 | mean ± std | {float(group['val/acc']):.4g} ± " in summary
    assert "fold 2 of 3 (seed 0): 16 val / 32 train samples from the train split" in output
    assert (tmp_path / "sweep" / "summary.png").stat().st_size > 0


def test_a_failed_folds_job_is_said_in_the_row(demo_dir: Path, tmp_path: Path) -> None:
    code, output, rows = _kfold_sweep(demo_dir, tmp_path, "0,1,5")  # fold 5 of 3 is refused
    assert code != 0  # the sweep still fails
    (group,) = [r for r in rows if r["status"] == MEAN_STD]
    ok = [float(r["val/acc"]) for r in rows if r["status"] == "ok"]
    assert group["folds"] == "2 of 3" and float(group["val/acc"]) == pytest.approx(np.mean(ok))
    summary = (tmp_path / "sweep" / "summary.md").read_text()
    assert "2 of 3 folds finished; failed: job 2 (ValueError: dataset.fold=5" in summary
    assert "2 of 3 folds finished" in output
    assert Counter(r["status"] for r in rows) == {"ok": 2, "failed": 1, MEAN_STD: 1}
