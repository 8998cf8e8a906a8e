"""Faults during a run: hung or dead workers and NaN losses (kill -9:
tests/process/test_run_dir_processes.py); the command line runs here (tests/cli.py)."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch

from engine.data.datasets.imagefolder import ImageFolderDataset
from src.loop import train
from tests.cli import run_cli
from tests.conftest import NARROW_MODEL
from tests.train_process import FAULTY as FAULTY_DATASET
from tests.train_process import allowing

ROOT = Path(__file__).resolve().parents[2]
FAULTY = f"dataset._target_={FAULTY_DATASET}"
ALLOW_TESTS = allowing(FAULTY_DATASET)


def _args(demo_dir: Path, run_dir: Path, *extra: str) -> list[str]:
    return [
        f"paths.demo_dir={demo_dir}",
        f"paths.log_dir={run_dir.parent}",
        f"hydra.run.dir={run_dir}",
        "loader.batch_size=16",
        NARROW_MODEL,
        ALLOW_TESTS,
        FAULTY,
        *extra,
    ]


@pytest.mark.parametrize(("fault", "expected"), [("hang", "timed out"), ("die", "exited")])
def test_a_hung_or_dead_worker_is_reported_with_its_file(demo_dir, tmp_path, fault, expected):
    culprit = ImageFolderDataset(str(demo_dir / "imagefolder"), "train").get_filename(5)
    args = _args(
        demo_dir,
        tmp_path / "run",
        f"+dataset.fault={fault}",
        "+dataset.at_index=5",
        "loader.num_workers=2",
        "loader.timeout=3",
        "trainer.max_epochs=1",
    )
    done = run_cli(*args, cwd=tmp_path)  # a hang fails as one (pytest-timeout)
    assert done.returncode != 0
    assert expected in done.stderr and f"while reading sample 5 ({culprit})" in done.stderr


def _nan_on_call(monkeypatch: pytest.MonkeyPatch, call: int) -> None:
    """Make the `call`-th cross-entropy of the run NaN (a diverging batch)."""
    original, calls = torch.nn.functional.cross_entropy, []

    def cross_entropy(*args, **kwargs):
        calls.append(1)
        loss = original(*args, **kwargs)
        return loss * float("nan") if len(calls) == call else loss

    monkeypatch.setattr(torch.nn.functional, "cross_entropy", cross_entropy)


def test_a_nan_loss_stops_the_run_naming_where_and_the_key(make_cfg, monkeypatch) -> None:
    _nan_on_call(monkeypatch, 2)
    with pytest.raises(FloatingPointError, match=r"epoch 1, batch 1 .*max_nonfinite_steps=0"):
        train(make_cfg("trainer.max_epochs=1"))


def test_nan_losses_within_the_budget_skip_their_step(make_cfg, monkeypatch, caplog) -> None:
    _nan_on_call(monkeypatch, 2)
    metrics = train(make_cfg("trainer.max_epochs=1", "trainer.max_nonfinite_steps=1"))
    assert "step skipped (1 of 1 allowed)" in caplog.text
    assert math.isfinite(metrics["train/loss"])  # the NaN batch was left out of the mean
