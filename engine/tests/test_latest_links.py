"""outputs/latest_<mode>: a failed run gives the link back to the run before it, unless a
newer run took it meanwhile (that newer run keeps it)."""

from __future__ import annotations

from pathlib import Path

from engine.runs.bookends import point_latest, restore_latest


def _runs(tmp_path: Path) -> tuple[Path, Path, Path, Path]:
    log_dir = tmp_path / "outputs"
    runs = [log_dir / "runs" / name for name in ("a", "b", "c")]
    for run in runs:
        run.mkdir(parents=True)
    return log_dir, *runs


def test_a_failed_run_hands_latest_back_to_the_run_before_it(tmp_path: Path) -> None:
    log_dir, a, b, _ = _runs(tmp_path)
    point_latest(log_dir, a, "train")
    before = point_latest(log_dir, b, "train")
    restore_latest(log_dir, "train", before, b)  # b failed
    assert (log_dir / "latest_train").resolve() == a.resolve()
    assert (log_dir / "latest").resolve() == b.resolve()  # to read why b failed


def test_a_failed_run_leaves_latest_to_a_newer_run_that_took_it(tmp_path: Path) -> None:
    log_dir, a, b, c = _runs(tmp_path)
    point_latest(log_dir, a, "train")
    before_b = point_latest(log_dir, b, "train")
    point_latest(log_dir, c, "train")  # c starts while b runs, and finishes
    restore_latest(log_dir, "train", before_b, b)  # then b fails
    assert (log_dir / "latest_train").resolve() == c.resolve()


def test_the_first_run_failing_removes_latest_mode(tmp_path: Path) -> None:
    log_dir, a, _, _ = _runs(tmp_path)
    before = point_latest(log_dir, a, "train")
    restore_latest(log_dir, "train", before, a)
    assert not (log_dir / "latest_train").is_symlink()
