"""A requeued job (the same fixed run dir, a child process each time) continues its own folder."""

from __future__ import annotations

from pathlib import Path

from tests.reliability.test_run_dirs import _assert_same_result, _kill_9_after, _steps, _train


def test_a_requeued_run_continues_its_own_folder(demo_dir: Path, tmp_path: Path, whole) -> None:
    """kill -9 mid-epoch, then trainer.resume=auto from a new run dir (it finds the killed run)
    and the same command in the killed run's own folder (a SLURM requeue): both end like the
    uninterrupted run, and the requeued folder keeps its newest checkpoints."""
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
