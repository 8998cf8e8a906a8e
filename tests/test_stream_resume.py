"""A stream stopped mid-epoch goes on with another loader worker count or world size and
trains every sample of the epoch exactly once (in another order); a stream that cannot say
which samples it trained on is refused in one line (engine/src/engine/runs/stream_resume.py). The same
topology replays the epoch exactly: tests/test_shard_streaming.py. Going on as two torchrun
ranks: tests/process/test_stream_resume_processes.py."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest
from torch.utils.data import DataLoader

from engine.data.datasets.tar_shards import TarShardDataset
from engine.runs.checkpoint_files import save_checkpoint
from engine_dev.api import load_checkpoint
from engine_dev.fixtures import assert_each_once
from src.loop import train
from tests.train_process import kill_at_step

# the demo's 3 train shards of 16: with 2 workers one reads 2 shards, the other 1; batches of
# 4, none dropped: 12 steps an epoch; a checkpoint every 3 steps, killed after step 5
RUN = (
    "dataset=iterable",
    "trainer.max_epochs=2",
    "loader.batch_size=4",
    "loader.drop_last=false",
    "trainer.record_samples=true",
    "trainer.checkpoint.every_n_steps=3",
)


def _killed_with_2_workers(make_cfg, monkeypatch, out: Path, *overrides: str) -> None:
    kill_at_step(monkeypatch, 5)
    with pytest.raises(RuntimeError, match="killed"):
        train(make_cfg(*RUN, "loader.num_workers=2", f"paths.output_dir={out}", *overrides))
    monkeypatch.undo()
    state = load_checkpoint(out / "checkpoints" / "last.pt")
    assert (state["epoch"], state["batches_done"]) == (1, 3)


def test_resume_left_out_shards_are_not_read_and_the_rest_once(demo_dir, tmp_path) -> None:
    for shard in (demo_dir / "shards").glob("train-*.tar"):
        shutil.copy(shard, tmp_path)
    shutil.copy(demo_dir / "shards" / "shards.json", tmp_path)
    data = TarShardDataset("train", f"{tmp_path}/train-*.tar", "unused", shuffle_buffer=4)
    data.tags_samples = True
    trained = np.zeros(48, bool)
    trained[0:16] = True  # all of shard 0, which then must not be opened
    trained[[16, 20, 40, 47]] = True
    (tmp_path / "train-000000.tar").unlink()
    data.set_epoch(3)
    data.resume_without(3, trained)
    assert len(data) == 48 - 20
    seen = [s.index for s in DataLoader(data, batch_size=None, num_workers=2)]
    assert sorted(seen) == sorted(np.flatnonzero(~trained).tolist())
    data.set_epoch(4)  # the next epoch is whole again
    assert len(data) == 48


def test_two_workers_stopped_mid_epoch_go_on_with_one_each_sample_once(
    make_cfg, tmp_path, monkeypatch, caplog
) -> None:
    out = tmp_path / "run"
    _killed_with_2_workers(make_cfg, monkeypatch, out)
    resumed = make_cfg(
        *RUN, "loader.num_workers=1", "trainer.resume=auto", f"paths.output_dir={out}"
    )
    with caplog.at_level("INFO"):
        metrics = train(resumed)
    assert "each sample once but in another order" in caplog.text
    assert_each_once(out)  # epoch 1 across the kill, and the whole epoch 2
    assert metrics["epochs"] == 2
    state = load_checkpoint(out / "checkpoints" / "last.pt")
    assert state["step"] == 24  # 12 steps of 4 samples an epoch, on one worker too


def test_a_resumed_epoch_stopped_again_keeps_what_both_runs_trained_on(
    make_cfg, tmp_path, monkeypatch
) -> None:
    out = tmp_path / "run"
    _killed_with_2_workers(make_cfg, monkeypatch, out)
    kill_at_step(monkeypatch, 8)  # the resumed run's checkpoint at step 6 holds both runs' 24
    with pytest.raises(RuntimeError, match="killed"):
        train(
            make_cfg(*RUN, "loader.num_workers=1", "trainer.resume=auto", f"paths.output_dir={out}")
        )
    monkeypatch.undo()
    train(make_cfg(*RUN, "loader.num_workers=0", "trainer.resume=auto", f"paths.output_dir={out}"))
    assert_each_once(out)


def test_a_stream_without_its_trained_samples_is_refused_on_another_topology(
    make_cfg, tmp_path, monkeypatch
) -> None:
    out = tmp_path / "run"
    _killed_with_2_workers(make_cfg, monkeypatch, out)
    last = out / "checkpoints" / "last.pt"
    state = load_checkpoint(last)
    save_checkpoint(last, state | {"stream_trained": None})  # as an untagged stream writes it
    with pytest.raises(ValueError) as refused:
        train(make_cfg(*RUN, "loader.num_workers=1", f"trainer.resume={last}"))
    message = str(refused.value)
    assert "\n" not in message and "does not record which samples" in message
    assert "loader.num_workers=2" in message


def test_a_leave_out_pass_stopped_again_is_never_replayed(make_cfg, tmp_path, monkeypatch) -> None:
    """2 workers, stopped; resumed on 0 workers (a leave-out pass), stopped again; resumed on
    0 workers once more: that pass did not begin as an uninterrupted one would, so replaying
    its first batches would repeat some samples and lose others."""
    out = tmp_path / "run"
    _killed_with_2_workers(make_cfg, monkeypatch, out)
    zero = (*RUN, "loader.num_workers=0", "trainer.resume=auto", f"paths.output_dir={out}")
    kill_at_step(monkeypatch, 8)
    with pytest.raises(RuntimeError, match="killed"):
        train(make_cfg(*zero))
    monkeypatch.undo()
    train(make_cfg(*zero))
    assert_each_once(out)
