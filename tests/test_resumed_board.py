"""One training, one TensorBoard run: a training killed after a checkpoint and resumed (into a
new run dir or its own), or resumed from an older checkpoint, reads back as one series per tag,
each step once: without the tail written after the checkpoint, without gaps. The resumed
writer's purge_step does it. Read with the EventAccumulator of TensorBoard's Python loader
(`--load_fast=false`); its default Rust loader shows the same (tensorboard 2.21's HTTP API, both
loaders, on a folder written as here: a first writer at purge_step 0, a second at 3)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from tensorboard.backend.event_processing.plugin_event_accumulator import EventAccumulator
from tensorboard.util.tensor_util import make_ndarray

from engine.runs.run_state import Checkpointer
from engine.runs.tensorboard import NOTE, event_files
from src.loop import train
from tests.train_process import kill_at_step

# 48 train images / batch 16 = 3 steps per epoch; 2 epochs = 6 steps; a checkpoint every 2
RUN = (
    "trainer.max_epochs=2",
    "trainer.log_every_n_steps=1",
    "trainer.checkpoint.every_n_steps=2",
    "model.widths=[8,16]",  # a small model: the test is about the event files
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
    assert {"train/loss", "val/acc"} <= scalars.keys() and "epoch" not in scalars
    for tag, series in scalars.items():
        per_step = tag in ("train/loss", "train/lr") or tag.startswith("~pipeline/")
        assert _steps(series) == (PER_STEP if per_step else EPOCH_ENDS)
    assert len(board["images"]["train/first_batch"]) == 1
    assert len(board["hparams"]["_hparams_/session_start_info"]) == 1


def _run(make_cfg, tmp_path: Path, name: str, *extra: str) -> None:
    out = f"paths.output_dir={tmp_path / name}"
    train(make_cfg(*RUN, f"paths.log_dir={tmp_path}", out, *extra))


def _next_second() -> None:
    """Wait for the clock's next second. TensorBoard reads a folder's event files in name
    order, and a name starts with the second its writer opened: runs of one training are
    seconds apart, but two runs in one test process could share a second, and then their
    names order by a per-process counter compared as text (.10 before .9)."""
    time.sleep(1 - time.time() % 1 + 0.01)


@pytest.mark.parametrize("resumed_in", ["second", "first"])  # a new run dir, or a requeued job's
def test_a_resumed_training_is_one_tensorboard_run(make_cfg, tmp_path, monkeypatch, resumed_in):
    kill_at_step(monkeypatch, 6)  # checkpoints at steps 2, 3, 4; step 5 is the killed tail
    with pytest.raises(RuntimeError, match="killed"):
        _run(make_cfg, tmp_path, "first")
    killed = _board(tmp_path / "first" / "tensorboard")["scalars"]["train/loss"]
    assert _steps(killed) == [1, 2, 3, 4, 5]
    monkeypatch.undo()
    _next_second()
    _run(make_cfg, tmp_path, resumed_in, "trainer.resume=auto")  # from step 4

    board = _board(tmp_path / resumed_in / "tensorboard")
    _assert_one_series(board)
    assert board["scalars"]["train/loss"][:4] == killed[:4]  # the points up to the checkpoint
    if resumed_in == "second":  # the killed run's dir is no TensorBoard run of its own any more
        assert event_files(tmp_path / "first" / "tensorboard") == []
        assert "second" in (tmp_path / "first" / "tensorboard" / NOTE).read_text()


def test_resuming_an_older_checkpoint_purges_everything_after_it(make_cfg, tmp_path) -> None:
    _run(make_cfg, tmp_path, "whole")  # the whole training: 6 steps, checkpoints kept 3, 4, 6
    whole = _board(tmp_path / "whole" / "tensorboard")["scalars"]["train/loss"]
    older = tmp_path / "whole" / "checkpoints" / "step00000003.pt"  # the end of epoch 1
    _next_second()
    _run(make_cfg, tmp_path, "again", f"trainer.resume={older}")

    board = _board(tmp_path / "again" / "tensorboard")
    _assert_one_series(board)  # epoch 2's points and steps 4-6 of the first run are gone
    assert board["scalars"]["train/loss"][:3] == whole[:3]
    assert _steps(board["text"]["config/text_summary"]) == [0, 4]  # each segment's config


def test_a_kill_in_the_epoch_end_save_logs_no_epoch_twice(make_cfg, tmp_path, monkeypatch) -> None:
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
    cfg = (*every3, "trainer.checkpoint.every_n_steps=3", f"paths.log_dir={tmp_path}")
    out = f"paths.output_dir={tmp_path / 'run'}"
    with pytest.raises(RuntimeError, match="killed"):
        train(make_cfg(*cfg, out))
    monkeypatch.undo()
    _next_second()
    train(make_cfg(*cfg, out, "trainer.resume=auto"))
    _assert_one_series(_board(tmp_path / "run" / "tensorboard"))
