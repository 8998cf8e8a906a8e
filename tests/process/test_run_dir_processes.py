"""A requeued job: a run in a fixed hydra.run.dir killed with kill -9 in a child process, then
started again with trainer.resume=auto (from a new run dir, and in its own folder as a SLURM
requeue does), ends like the uninterrupted run (the in-process checks of run dirs:
tests/reliability/test_run_dirs.py)."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.reliability.test_run_dirs import (
    _args,
    _assert_same_result,
    _steps,
    _train,
    _uninterrupted,
)

ROOT = Path(__file__).resolve().parents[2]


def _kill_9_after(demo_dir: Path, run: Path, step: int) -> int:
    """Start the run and SIGKILL it once checkpoint `step` exists; the last step it saved."""
    run.parent.mkdir(parents=True, exist_ok=True)
    proc = subprocess.Popen(
        [sys.executable, str(ROOT / "train.py"), *_args(demo_dir, run)],
        cwd=run.parent,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    while not (run / "checkpoints" / f"step{step:08d}.pt").exists():  # a hang: pytest-timeout
        assert proc.poll() is None, f"the run ended before step {step}"
        time.sleep(0.01)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    # the newest complete step (written atomically); last.pt may still point at the one before
    # it when the kill lands between the write and the link
    saved = max(int(p.stem[4:]) for p in (run / "checkpoints").glob("step*.pt"))
    assert saved < 8 and not (run / "metrics.json").exists()
    return saved


def test_a_requeued_run_continues_its_own_folder(
    demo_dir: Path, tmp_path: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """kill -9 mid-epoch, then trainer.resume=auto from a new run dir (it finds the killed run)
    and the same command in the killed run's own folder (a SLURM requeue): both end like the
    uninterrupted run, and the requeued folder keeps its newest checkpoints."""
    # outside tmp_path (paths.log_dir), where trainer.resume=auto would find it
    whole = _uninterrupted(demo_dir, tmp_path_factory.mktemp("whole") / "run")
    run = tmp_path / "run"
    saved = _kill_9_after(demo_dir, run, 3)
    elsewhere = _train(demo_dir, tmp_path / "elsewhere", "trainer.resume=auto")
    assert elsewhere.returncode == 0, elsewhere.stderr[-3000:]
    assert f"resumed from {run}/checkpoints/step{saved:08d}.pt" in elsewhere.stdout
    _assert_same_result(tmp_path / "elsewhere", whole)
    again = _train(demo_dir, run, "trainer.resume=auto")
    assert again.returncode == 0, again.stderr[-3000:]
    assert f"resumed from {run}/checkpoints/step{saved:08d}.pt" in again.stdout
    assert "starting fresh" not in again.stdout
    _assert_same_result(run, whole)
    assert _steps(run) == ["step00000007.pt", "step00000008.pt", "step00000009.pt"]
