"""Stopping and resuming: the continued run ends with exactly the uninterrupted run's weights."""

from __future__ import annotations

import copy
import signal
from pathlib import Path

import pytest
import torch
from omegaconf import OmegaConf

from engine.api import Epoch
from engine.runs.resume import config_key
from engine_dev.api import load_checkpoint
from src.loop import train
from src.step import TrainStep

# 48 train images / batch 16 = 3 batches per epoch (drop_last), 3 epochs = 9 optimizer steps
RUN = ("trainer.max_epochs=3", "trainer.log_every_n_steps=1")


def _run(make_cfg, log_dir: Path, name: str, *overrides: str) -> dict:
    cfg = make_cfg(
        *RUN, f"paths.log_dir={log_dir}", f"paths.output_dir={log_dir / name}", *overrides
    )
    return train(cfg)


def _weights(run: Path) -> dict[str, torch.Tensor]:
    return load_checkpoint(run / "checkpoints" / "last.pt")["model"]


def _stop_at_step(monkeypatch: pytest.MonkeyPatch, step: int, signum: int) -> None:
    """Send `signum` to this process right after optimizer step `step` (a pre-emption)."""
    original = TrainStep.optimizer_step

    def stepping(self: TrainStep) -> None:
        original(self)
        if self.steps == step:
            signal.raise_signal(signum)

    monkeypatch.setattr(TrainStep, "optimizer_step", stepping)


@pytest.mark.parametrize(
    ("sampler", "workers"), [("random", 0), ("random", 2), ("weighted", 0), ("weighted", 2)]
)
def test_resume_mid_epoch_equals_the_uninterrupted_run(
    make_cfg, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, sampler: str, workers: int
) -> None:
    knobs = (f"sampler={sampler}", f"loader.num_workers={workers}")
    whole = _run(make_cfg, tmp_path / "a", "run", *knobs)

    _stop_at_step(monkeypatch, 4, signal.SIGTERM)  # epoch 2, after its first batch
    with pytest.raises(SystemExit) as stopped:
        _run(make_cfg, tmp_path / "b", "first", *knobs)
    assert stopped.value.code == 128 + signal.SIGTERM
    del stopped  # its traceback holds the stopped run's loaders: their workers end now
    saved = load_checkpoint(tmp_path / "b" / "first" / "checkpoints" / "last.pt")
    assert (saved["epoch"], saved["batches_done"], saved["step"]) == (2, 1, 4)
    assert not (tmp_path / "b" / "first" / "metrics.json").exists()

    monkeypatch.undo()
    resumed = _run(make_cfg, tmp_path / "b", "second", *knobs, "trainer.resume=auto")
    a, b = _weights(tmp_path / "a" / "run"), _weights(tmp_path / "b" / "second")
    assert a.keys() == b.keys()
    for name in a:
        assert torch.allclose(a[name], b[name], atol=1e-6), name
    for key in ("val/acc", "val/loss", "train/loss", "val/best_acc", "epochs"):
        assert resumed[key] == pytest.approx(whole[key], abs=1e-6), key


def test_resume_between_epochs_and_after_ctrl_c(make_cfg, tmp_path: Path, monkeypatch) -> None:
    whole = _run(make_cfg, tmp_path / "a", "run")
    _stop_at_step(monkeypatch, 3, signal.SIGINT)  # the last step of epoch 1
    with pytest.raises(SystemExit) as stopped:
        _run(make_cfg, tmp_path / "b", "first")
    assert stopped.value.code == 128 + signal.SIGINT
    del stopped  # its traceback holds the stopped run's loaders: their workers end now
    monkeypatch.undo()
    resumed = _run(make_cfg, tmp_path / "b", "second", "trainer.resume=auto")
    assert resumed["val/acc"] == pytest.approx(whole["val/acc"])
    assert resumed["train/loss"] == pytest.approx(whole["train/loss"])
    history = load_checkpoint(tmp_path / "b" / "second" / "checkpoints" / "last.pt")["history"]
    assert [round(h["val/acc"], 6) for h in history] == [
        round(h["val/acc"], 6)
        for h in load_checkpoint(tmp_path / "a" / "run" / "checkpoints" / "last.pt")["history"]
    ]


def test_results_do_not_depend_on_num_workers(make_cfg, tmp_path: Path) -> None:
    # at the same torch threads: auto (null) gives the main process fewer beside more workers,
    # and a sum over other threads rounds otherwise in its last bits
    zero = _run(make_cfg, tmp_path / "a", "run", "loader.num_workers=0", "trainer.num_threads=1")
    two = _run(make_cfg, tmp_path / "b", "run", "loader.num_workers=2", "trainer.num_threads=1")
    a, b = _weights(tmp_path / "a" / "run"), _weights(tmp_path / "b" / "run")
    assert all(torch.equal(a[k], b[k]) for k in a)
    assert zero["val/acc"] == two["val/acc"] and zero["train/loss"] == two["train/loss"]


def test_stop_after_the_last_partial_batch_resumes_into_validation(make_cfg, tmp_path, monkeypatch):
    knobs = ("loader.drop_last=false", "loader.batch_size=20")  # 48 = 20 + 20 + 8: 3 steps
    whole = _run(make_cfg, tmp_path / "a", "run", *knobs)
    _stop_at_step(monkeypatch, 3, signal.SIGTERM)  # after epoch 1's last batch, before val
    with pytest.raises(SystemExit):
        _run(make_cfg, tmp_path / "b", "first", *knobs)
    assert (
        load_checkpoint(tmp_path / "b" / "first" / "checkpoints" / "last.pt")["batches_done"] == 3
    )
    monkeypatch.undo()
    resumed = _run(make_cfg, tmp_path / "b", "second", *knobs, "trainer.resume=auto")
    assert resumed["val/acc"] == pytest.approx(whole["val/acc"])
    assert resumed["train/loss"] == pytest.approx(whole["train/loss"])


def test_a_resumed_run_folder_has_the_best_checkpoint(make_cfg, tmp_path, monkeypatch) -> None:
    _stop_at_step(monkeypatch, 4, signal.SIGTERM)
    with pytest.raises(SystemExit):
        _run(make_cfg, tmp_path, "first", "optimizer.lr=0.0")  # epoch 1 stays the best
    monkeypatch.undo()
    _run(make_cfg, tmp_path, "second", "optimizer.lr=0.0", "trainer.resume=auto")
    best = tmp_path / "second" / "checkpoints" / "best.pt"
    assert best.is_file() and load_checkpoint(best)["epoch"] == 1


def test_a_resumed_epochs_last_step_is_not_saved_mid_epoch(make_cfg, tmp_path, monkeypatch):
    """A resumed epoch counts the batches it has left: at its last step a due mid-epoch save
    waits for the epoch-end one, so a run killed in that epoch's evaluation resumes before
    the last step, never into an evaluation (and its logging) a second time."""
    every = ("trainer.checkpoint.every_n_steps=1", "trainer.checkpoint.keep_last=20")
    _stop_at_step(monkeypatch, 4, signal.SIGTERM)  # epoch 2, after its first of 3 batches
    with pytest.raises(SystemExit):
        _run(make_cfg, tmp_path, "first", *every)
    monkeypatch.undo()

    def killed_in_evaluation(self, model=None):
        raise RuntimeError("killed")

    monkeypatch.setattr(Epoch, "evaluate", killed_in_evaluation)  # epoch 2's, resumed
    with pytest.raises(RuntimeError, match="killed"):
        _run(make_cfg, tmp_path, "second", *every, "trainer.resume=auto")
    last = load_checkpoint(tmp_path / "second" / "checkpoints" / "last.pt")
    assert (last["epoch"], last["batches_done"], last["step"]) == (2, 2, 5)


def test_the_config_key_leaves_out_what_a_training_does_not_compute_with(make_cfg) -> None:
    """What trainer.resume=auto matches: another mode's settings (a release may add keys to
    them) and the allowlists do not make a training another run; its own keys do."""
    resolved = OmegaConf.to_container(make_cfg(), resolve=True)
    key = config_key(resolved)
    widened = copy.deepcopy(resolved)
    widened["eval"]["a_key_a_release_adds"] = 1
    widened["allowed_targets_extra"] = ["myproject.*"]
    widened["mode"] = "eval"
    assert config_key(widened) == key
    widened["optimizer"]["lr"] = 0.5
    assert config_key(widened) != key
