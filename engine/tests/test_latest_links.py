"""outputs/latest_<mode>: a failed run gives the link back to the run before it, unless a
newer run took it meanwhile (that newer run keeps it); a user's file of that name is kept, and
a paths.log_dir that is a symlink loop is a warning, as any log_dir that cannot be made."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from engine.runs.bookends import latest_run, point_latest, restore_latest
from engine.runs.tensorboard_index import link_sweep


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


def test_a_users_file_named_latest_mode_is_kept_with_a_warning(tmp_path: Path, caplog) -> None:
    log_dir, a, _, _ = _runs(tmp_path)
    (log_dir / "latest_train").write_text("my notes")  # was silently replaced by the link
    with caplog.at_level(logging.WARNING):
        point_latest(log_dir, a, "train")
    assert (log_dir / "latest_train").read_text() == "my notes"
    assert f"{log_dir / 'latest_train'} is a file, not a link: kept" in caplog.text
    assert (log_dir / "latest").resolve() == a.resolve()


def test_a_log_dir_in_a_symlink_loop_is_a_warning_naming_it(tmp_path: Path, caplog) -> None:
    loop, other = tmp_path / "loopA", tmp_path / "loopB"
    loop.symlink_to(other)
    other.symlink_to(loop)
    run = tmp_path / "run"
    (run / "tensorboard").mkdir(parents=True)
    with caplog.at_level(logging.WARNING):
        assert point_latest(loop, run, "train") is None
    assert f"paths.log_dir={loop} cannot be made (a link to nothing, or in a loop)" in caplog.text
    # the TensorBoard index link raised RuntimeError('Symlink loop') and stopped the run
    assert link_sweep(loop, "train", run, run / "tensorboard") is None


def test_latest_after_sweeps_alone_names_the_sweeps_jobs(tmp_path: Path) -> None:
    """A sweep's jobs point latest_sweep and leave latest_train alone: `latest` with only
    sweeps behind it says where their jobs are."""
    log_dir, sweep = tmp_path / "outputs", tmp_path / "outputs" / "multiruns" / "a"
    (sweep / "0_lr=0.1").mkdir(parents=True)
    with pytest.raises(
        FileNotFoundError, match=r"latest_train does not exist .*started on its own"
    ) as no_sweep:
        latest_run(log_dir, "train", "eval.checkpoint")
    assert "latest_sweep" not in str(no_sweep.value)
    point_latest(log_dir, sweep, "sweep", both=False)
    with pytest.raises(FileNotFoundError, match="a sweep's jobs leave it alone: name one, "
                       rf"eval.checkpoint={log_dir / 'latest_sweep'}/<job dir>"):  # fmt: skip
        latest_run(log_dir, "train", "eval.checkpoint")
    assert not (log_dir / "latest").exists()


def test_a_file_of_yours_named_latest_is_named_not_taken_for_a_missing_run(tmp_path) -> None:
    """It said 'does not exist (no mode=train run has started ...)'; a folder of yours there
    was taken for the run."""
    log_dir = tmp_path / "outputs"
    log_dir.mkdir()
    (log_dir / "latest_train").write_text("my notes\n")
    with pytest.raises(FileNotFoundError, match=r"latest_train is a file of yours, not the link"):
        latest_run(log_dir, "train", "eval.checkpoint")
    (log_dir / "latest_train").unlink()
    (log_dir / "latest_train").mkdir()
    with pytest.raises(FileNotFoundError, match=r"latest_train is a folder of yours"):
        latest_run(log_dir, "train", "eval.checkpoint")


def test_a_log_dir_that_takes_no_link_is_a_warning_not_a_raw_oserror(tmp_path, monkeypatch, caplog):
    """A read-only paths.log_dir with a writable run dir failed on the link's temp file."""
    run = tmp_path / "runs" / "a"
    run.mkdir(parents=True)

    unlink = Path.unlink

    def refused(self, *args, **kwargs):
        if self.name.startswith(".latest"):  # the staged link, in a folder that takes none
            raise PermissionError(13, "Permission denied")
        return unlink(self, *args, **kwargs)

    monkeypatch.setattr(Path, "unlink", refused)
    with caplog.at_level(logging.WARNING):
        point_latest(tmp_path / "outputs", run, "train")
    assert "could not point" in caplog.text and "Permission denied" in caplog.text
