"""A resumed training's earlier event files join its new run dir: moved with a note left
behind, or, from a folder the user cannot change, copied with a warning."""

from __future__ import annotations

import errno
import logging
import shutil
from pathlib import Path

import pytest

from engine.runs.tensorboard import NOTE, event_files, take_over_events


def _earlier_run(tmp_path: Path) -> Path:
    board = tmp_path / "first" / "tensorboard"
    board.mkdir(parents=True)
    for name in (
        "events.out.tfevents.1700000000.host.1.0",
        "events.out.tfevents.1700000100.host.1.0",
    ):
        (board / name).write_bytes(name.encode())
    return board


def test_the_earlier_files_move_and_a_note_says_where(tmp_path: Path) -> None:
    source, board = _earlier_run(tmp_path), tmp_path / "second" / "tensorboard"
    names = [f.name for f in event_files(source)]
    assert take_over_events(source, board) == 2
    assert [f.name for f in event_files(board)] == names
    assert event_files(source) == []
    assert "second" in (source / NOTE).read_text()


def test_a_folder_that_cannot_change_keeps_its_files_and_they_are_copied(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    source, board = _earlier_run(tmp_path), tmp_path / "second" / "tensorboard"

    def read_only(src: Path, dst: Path) -> None:
        raise PermissionError(errno.EACCES, "Permission denied", str(src))

    monkeypatch.setattr(shutil, "move", read_only)
    with caplog.at_level(logging.WARNING):
        assert take_over_events(source, board) == 2
    assert [f.read_bytes() for f in event_files(board)] == [
        f.read_bytes() for f in event_files(source)
    ]
    assert not (source / NOTE).exists()
    assert f"{source} cannot be changed" in caplog.text


def test_other_errors_are_not_taken_for_a_read_only_folder(tmp_path, monkeypatch) -> None:
    source, board = _earlier_run(tmp_path), tmp_path / "second" / "tensorboard"

    def full(src: Path, dst: Path) -> None:
        raise OSError(errno.ENOSPC, "No space left on device", str(dst))

    monkeypatch.setattr(shutil, "move", full)
    with pytest.raises(OSError, match="No space left"):
        take_over_events(source, board)


def test_a_second_resume_finds_the_events_where_the_first_took_them(tmp_path: Path) -> None:
    """A resumed into B, B killed before its first checkpoint, A's checkpoint resumed again
    into C: C gets A's events from B (and B's own, which its purge_step hides)."""
    source, second = _earlier_run(tmp_path), tmp_path / "second" / "tensorboard"
    names = [f.name for f in event_files(source)]
    take_over_events(source, second)
    (second / "events.out.tfevents.1700000200.host.2.0").write_bytes(b"B's own")
    third = tmp_path / "third" / "tensorboard"
    assert take_over_events(source, third) == 3
    assert [f.name for f in event_files(third)] == [
        *names,
        "events.out.tfevents.1700000200.host.2.0",
    ]
    assert event_files(second) == [] and str(third) in (second / NOTE).read_text()


def test_a_kill_between_two_moves_loses_no_file(tmp_path: Path, monkeypatch) -> None:
    source, second = _earlier_run(tmp_path), tmp_path / "second" / "tensorboard"
    names, real_move, moved = [f.name for f in event_files(source)], shutil.move, []

    def killed_after_one(src: Path, dst: Path) -> None:
        if moved:
            raise KeyboardInterrupt  # the process dies here
        moved.append(real_move(src, dst))

    with monkeypatch.context() as patched:
        patched.setattr(shutil, "move", killed_after_one)
        with pytest.raises(KeyboardInterrupt):
            take_over_events(source, second)
    third = tmp_path / "third" / "tensorboard"
    assert take_over_events(source, third) == 2
    assert [f.name for f in event_files(third)] == names


def test_a_note_that_is_a_link_changes_nothing_elsewhere(tmp_path: Path) -> None:
    """A foreign run's CONTINUED.txt linked to a file of yours: the note replaces the link."""
    source, victim = _earlier_run(tmp_path), tmp_path / "victim.txt"
    victim.write_text("mine")
    (source / NOTE).symlink_to(victim)
    take_over_events(source, tmp_path / "second" / "tensorboard")
    assert victim.read_text() == "mine" and not (source / NOTE).is_symlink()
