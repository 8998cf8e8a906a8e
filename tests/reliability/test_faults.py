"""Faults during a run: hung or dead workers, kill -9, NaN losses. Child processes get a hard
timeout, so a hang fails the test instead of the suite."""

from __future__ import annotations

import math
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from engine.data.datasets.imagefolder import ImageFolderDataset
from engine.runs.checkpoint_files import load_checkpoint
from src.loop import train
from tests.train_process import FAULTY as FAULTY_DATASET
from tests.train_process import allowing

ROOT = Path(__file__).resolve().parents[2]
FAULTY = f"dataset._target_={FAULTY_DATASET}"
ALLOW_TESTS = allowing(FAULTY_DATASET)


def _args(demo_dir: Path, run_dir: Path, *extra: str) -> list[str]:
    return [
        sys.executable,
        str(ROOT / "train.py"),
        f"paths.demo_dir={demo_dir}",
        f"paths.log_dir={run_dir.parent}",
        f"hydra.run.dir={run_dir}",
        "loader.batch_size=16",
        ALLOW_TESTS,
        FAULTY,
        *extra,
    ]


@pytest.mark.parametrize(("fault", "expected"), [("hang", "timed out"), ("die", "exited")])
@pytest.mark.process
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
    start = time.monotonic()
    done = subprocess.run(args, capture_output=True, text=True, timeout=90, check=False)
    assert done.returncode != 0
    assert time.monotonic() - start < 60
    assert expected in done.stderr and f"while reading sample 5 ({culprit})" in done.stderr


@pytest.mark.process
def test_kill_9_mid_epoch_then_resume_auto_equals_the_uninterrupted_run(demo_dir, tmp_path):
    run = (
        "+dataset.fault=slow",
        "+dataset.delay_s=0.02",
        "loader.num_workers=2",
        "trainer.max_epochs=3",
        "trainer.checkpoint.every_n_steps=1",
    )
    whole = subprocess.run(
        _args(demo_dir, tmp_path / "a" / "run", *run),
        timeout=120,
        capture_output=True,
        text=True,
        check=False,
    )
    assert whole.returncode == 0, whole.stderr[-2000:]

    first = tmp_path / "b" / "first"
    proc = subprocess.Popen(
        _args(demo_dir, first, *run), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    deadline = time.monotonic() + 90
    while not (first / "checkpoints" / "step00000004.pt").exists():  # epoch 2, batch 1
        assert proc.poll() is None and time.monotonic() < deadline, "never reached step 4"
        time.sleep(0.01)
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    killed_at = load_checkpoint(first / "checkpoints" / "last.pt")
    assert killed_at["step"] < 9 and not (first / "metrics.json").exists()

    again = subprocess.run(
        _args(demo_dir, tmp_path / "b" / "second", *run, "trainer.resume=auto"),
        timeout=120,
        capture_output=True,
        text=True,
        check=False,
    )
    assert again.returncode == 0, again.stderr[-2000:]
    assert "resumed from" in again.stdout
    a = load_checkpoint(tmp_path / "a" / "run" / "checkpoints" / "last.pt")["model"]
    b = load_checkpoint(tmp_path / "b" / "second" / "checkpoints" / "last.pt")["model"]
    assert all(torch.allclose(a[k], b[k], atol=1e-6) for k in a)


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
