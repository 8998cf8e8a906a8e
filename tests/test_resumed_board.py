"""One training, one TensorBoard run: a training killed after a checkpoint and resumed reads back
(with TensorBoard's own EventAccumulator) as one monotonic series per tag, without the killed
run's tail and without gaps."""

from __future__ import annotations

from pathlib import Path

import pytest
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from engine.runs.board_history import NOTE, event_files
from src.loop import train
from src.step import TrainStep

# 48 train images / batch 16 = 3 steps per epoch; 2 epochs = 6 steps; a checkpoint every 2
RUN = (
    "trainer.max_epochs=2",
    "trainer.log_every_n_steps=1",
    "trainer.checkpoint.every_n_steps=2",
    "model.widths=[8,16]",  # a small model: the test is about the event files
)


def _board(folder: Path) -> EventAccumulator:
    board = EventAccumulator(str(folder), size_guidance={"scalars": 0, "images": 0})
    board.Reload()
    return board


def _kill_at_step(monkeypatch: pytest.MonkeyPatch, step: int) -> None:
    """Die right after optimizer step `step` (before its loss point and checkpoint), like
    kill -9 some steps after the last checkpoint (here: step 4, mid-epoch 2)."""
    original = TrainStep.optimizer_step

    def stepping(self: TrainStep) -> None:
        original(self)
        if self.steps == step:
            raise RuntimeError("killed")

    monkeypatch.setattr(TrainStep, "optimizer_step", stepping)


@pytest.mark.parametrize("resumed_in", ["second", "first"])  # a new run dir, or a requeued job's
def test_a_resumed_training_is_one_tensorboard_run(make_cfg, tmp_path, monkeypatch, resumed_in):
    def run(name: str, *extra: str) -> None:
        train(
            make_cfg(
                *RUN, f"paths.log_dir={tmp_path}", f"paths.output_dir={tmp_path / name}", *extra
            )
        )

    _kill_at_step(monkeypatch, 6)  # checkpoints at steps 2, 3, 4; step 5 is the killed tail
    with pytest.raises(RuntimeError, match="killed"):
        run("first")
    killed = _board(tmp_path / "first" / "tensorboard")
    assert [e.step for e in killed.Scalars("train/loss")] == [1, 2, 3, 4, 5]
    monkeypatch.undo()
    run(resumed_in, "trainer.resume=auto")

    board = _board(tmp_path / resumed_in / "tensorboard")
    for tag in board.Tags()["scalars"]:
        steps = [e.step for e in board.Scalars(tag)]
        expected = list(range(1, 7)) if tag in ("train/loss", "train/lr") else [1, 2]
        assert steps == expected, tag  # one point per step or epoch: none twice, none missing
    carried = {e.step: e.value for e in killed.Scalars("train/loss") if e.step <= 4}
    assert {e.step: e.value for e in board.Scalars("train/loss")[:4]} == carried
    assert len(board.Images("train/first_batch")) == 1
    assert len(event_files(tmp_path / resumed_in / "tensorboard")) == 1
    if resumed_in == "second":  # the killed run's dir is no TensorBoard run of its own any more
        assert event_files(tmp_path / "first" / "tensorboard") == []
        assert "second" in (tmp_path / "first" / "tensorboard" / NOTE).read_text()
