"""A resumed training's earlier event files join its new run dir: moved with a note left
behind, or, from a folder the user cannot change, copied with a warning.

One training, one TensorBoard run (end to end on the reference project, logger=tensorboard): a
training killed after a checkpoint and resumed (into a new run dir or its own), or resumed from
an older checkpoint, reads back as one series per tag, each step once: without the tail written
after the checkpoint, without gaps. The resumed writer's purge_step does it. Read with the
EventAccumulator of TensorBoard's Python loader (`--load_fast=false`); its default Rust loader
shows the same (tensorboard 2.21's HTTP API, both loaders, on a folder written as here: a first
writer at purge_step 0, a second at 3)."""

from __future__ import annotations

import errno
import logging
import shutil
import time
from pathlib import Path

import pytest
from tensorboard.backend.event_processing.plugin_event_accumulator import EventAccumulator
from tensorboard.util.tensor_util import make_ndarray

from engine.runs.run_state import Checkpointer
from engine.runs.tensorboard import NOTE, event_files, take_over_events
from reference.loop import train
from tests.interrupts import kill_at_step


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


# 48 train images / batch 16 = 3 steps per epoch; 2 epochs = 6 steps; a checkpoint every 2
RUN = (
    "logger=tensorboard",
    "trainer.max_epochs=2",
    "trainer.log_every_n_steps=1",
    "trainer.checkpoint.every_n_steps=2",
)
PER_STEP = list(range(1, 7))  # train/loss and train/lr: every optimizer step
EPOCH_ENDS = [3, 6]  # every per-epoch scalar: the step that ended its epoch


def _board(folder: Path) -> dict[str, dict[str, list[tuple[int, object]]]]:
    """What TensorBoard shows of `folder`: plugin -> tag -> [(step, value)] (scalars as floats)."""
    board = EventAccumulator(str(folder), size_guidance={"tensors": 0})
    board.Reload()
    shown: dict[str, dict[str, list[tuple[int, object]]]] = {}
    for tag in board.Tags()["tensors"]:
        plugin = board.SummaryMetadata(tag).plugin_data.plugin_name
        events = board.Tensors(tag)
        values = [make_ndarray(e.tensor_proto) for e in events]
        values = [float(v) for v in values] if plugin == "scalars" else values
        shown.setdefault(plugin, {})[tag] = [
            (e.step, v) for e, v in zip(events, values, strict=True)
        ]
    return shown


def _steps(series: list[tuple[int, object]]) -> list[int]:
    return [step for step, _ in series]


def _assert_one_series(board: dict[str, dict[str, list[tuple[int, object]]]]) -> None:
    """Every scalar tag holds each of its steps exactly once; the training has one HParams
    entry and one first-batch grid."""
    scalars = board["scalars"]
    assert {"train/loss", "val/loss"} <= scalars.keys() and "epoch" not in scalars
    for tag, series in scalars.items():
        per_step = tag in ("train/loss", "train/lr") or tag.startswith("~pipeline/")
        assert _steps(series) == (PER_STEP if per_step else EPOCH_ENDS)
    assert len(board["images"]["train/first_batch"]) == 1
    assert len(board["hparams"]["_hparams_/session_start_info"]) == 1


def _next_second() -> None:
    """Wait for the clock's next second. TensorBoard reads a folder's event files in name
    order, and a name starts with the second its writer opened: runs of one training are
    seconds apart, but two runs in one test process could share a second, and then their
    names order by a per-process counter compared as text (.10 before .9)."""
    time.sleep(1 - time.time() % 1 + 0.01)


@pytest.mark.parametrize("resumed_in", ["second", "first"])  # a new run dir, or a requeued job's
def test_a_resumed_training_is_one_tensorboard_run(
    reference_cfg, tmp_path, monkeypatch, resumed_in
) -> None:
    kill_at_step(monkeypatch, 6)  # checkpoints at steps 2, 3, 4; step 5 is the killed tail
    with pytest.raises(RuntimeError, match="killed"):
        train(reference_cfg("first", *RUN))
    killed = _board(tmp_path / "first" / "tensorboard")["scalars"]["train/loss"]
    assert _steps(killed) == [1, 2, 3, 4, 5]
    monkeypatch.undo()
    _next_second()
    train(reference_cfg(resumed_in, *RUN, "trainer.resume=auto"))  # from step 4

    board = _board(tmp_path / resumed_in / "tensorboard")
    _assert_one_series(board)
    assert board["scalars"]["train/loss"][:4] == killed[:4]  # the points up to the checkpoint
    if resumed_in == "second":  # the killed run's dir is no TensorBoard run of its own any more
        assert event_files(tmp_path / "first" / "tensorboard") == []
        assert "second" in (tmp_path / "first" / "tensorboard" / NOTE).read_text()


def test_resuming_an_older_checkpoint_purges_everything_after_it(reference_cfg, tmp_path) -> None:
    train(reference_cfg("whole", *RUN))  # the whole training: 6 steps, checkpoints kept 3, 4, 6
    whole = _board(tmp_path / "whole" / "tensorboard")["scalars"]["train/loss"]
    older = tmp_path / "whole" / "checkpoints" / "step00000003.pt"  # the end of epoch 1
    _next_second()
    train(reference_cfg("again", *RUN, f"trainer.resume={older}"))

    board = _board(tmp_path / "again" / "tensorboard")
    _assert_one_series(board)  # epoch 2's points and steps 4-6 of the first run are gone
    assert board["scalars"]["train/loss"][:3] == whole[:3]
    assert _steps(board["text"]["config/text_summary"]) == [0, 4]  # each segment's config


def test_a_kill_in_the_epoch_end_save_logs_no_epoch_twice(reference_cfg, monkeypatch) -> None:
    # a save due at an epoch's last step (here every 3 steps, epoch 1 ends at step 3) waits for
    # the epoch-end checkpoint, so a kill while that one is written resumes before the epoch's
    # points, not between them and a second evaluation of the same epoch
    original = Checkpointer.save

    def killed_at_epoch_end(self: Checkpointer, epoch, batches_done, *args, **kwargs) -> None:
        if batches_done is None:
            self.flush()  # what the epoch logged is on disk, as at a real kill
            raise RuntimeError("killed")
        original(self, epoch, batches_done, *args, **kwargs)

    monkeypatch.setattr(Checkpointer, "save", killed_at_epoch_end)
    every3 = [o for o in RUN if not o.startswith("trainer.checkpoint")]
    cfg = (*every3, "trainer.checkpoint.every_n_steps=3")
    with pytest.raises(RuntimeError, match="killed"):
        train(reference_cfg("run", *cfg))
    monkeypatch.undo()
    _next_second()
    train(reference_cfg("run", *cfg, "trainer.resume=auto"))
    _assert_one_series(_board(Path(reference_cfg("run").paths.output_dir) / "tensorboard"))
