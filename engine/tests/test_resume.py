"""Stopping and resuming, on the reference project: a run stopped between epochs (Ctrl-C) or
after an epoch's last partial batch continues to the uninterrupted run's metrics; a resumed
run's folder carries the best checkpoint; a resumed epoch's last step waits for the epoch-end
save; the same weights with 0 or 2 workers; what trainer.resume=auto matches. (Stopped mid-epoch,
random or weighted, 0 or 2 workers: test_reference_project.py's
test_a_stopped_run_resumes_to_the_uninterrupted_weights_and_ema.)"""

from __future__ import annotations

import copy
import signal
from pathlib import Path

import pytest
import torch
from omegaconf import OmegaConf

from engine.api import Epoch
from engine.runs.checkpoint_files import load_checkpoint
from engine.runs.resume import config_key
from reference.loop import train
from tests.interrupts import stop_at_step

# 48 train images / batch 16 = 3 batches per epoch (drop_last), 3 epochs = 9 optimizer steps
# (the reference trainer's max_epochs and log_every_n_steps)


def _last(reference_cfg, name: str) -> dict:
    return load_checkpoint(Path(reference_cfg(name).paths.output_dir) / "checkpoints" / "last.pt")


def _weights(reference_cfg, name: str) -> dict[str, torch.Tensor]:
    return _last(reference_cfg, name)["model"]


def test_resume_between_epochs_and_after_ctrl_c(reference_cfg, monkeypatch) -> None:
    stop_at_step(monkeypatch, 3, signal.SIGINT)  # the last step of epoch 1
    with pytest.raises(SystemExit) as stopped:
        train(reference_cfg("first"))
    assert stopped.value.code == 128 + signal.SIGINT
    del stopped  # its traceback holds the stopped run's loaders: their workers end now
    monkeypatch.undo()
    resumed = train(reference_cfg("second", "trainer.resume=auto"))
    whole = train(reference_cfg("run"))  # after: auto found the stopped run alone
    assert resumed["val/loss"] == pytest.approx(whole["val/loss"])
    assert resumed["train/loss"] == pytest.approx(whole["train/loss"])
    history = _last(reference_cfg, "second")["history"]
    assert [round(h["val/loss"], 6) for h in history] == [
        round(h["val/loss"], 6) for h in _last(reference_cfg, "run")["history"]
    ]


def test_results_do_not_depend_on_num_workers(reference_cfg) -> None:
    # at the same torch threads: auto (null) gives the main process fewer beside more workers,
    # and a sum over other threads rounds otherwise in its last bits
    zero = train(reference_cfg("zero", "loader.num_workers=0", "trainer.num_threads=1"))
    two = train(reference_cfg("two", "loader.num_workers=2", "trainer.num_threads=1"))
    a, b = _weights(reference_cfg, "zero"), _weights(reference_cfg, "two")
    assert all(torch.equal(a[k], b[k]) for k in a)
    assert zero["val/loss"] == two["val/loss"] and zero["train/loss"] == two["train/loss"]


def test_stop_after_the_last_partial_batch_resumes_into_validation(reference_cfg, monkeypatch):
    knobs = ("loader.drop_last=false", "loader.batch_size=20")  # 48 = 20 + 20 + 8: 3 steps
    stop_at_step(monkeypatch, 3, signal.SIGTERM)  # after epoch 1's last batch, before val
    with pytest.raises(SystemExit):
        train(reference_cfg("first", *knobs))
    assert _last(reference_cfg, "first")["batches_done"] == 3
    monkeypatch.undo()
    resumed = train(reference_cfg("second", *knobs, "trainer.resume=auto"))
    whole = train(reference_cfg("run", *knobs))  # after: auto found the stopped run alone
    assert resumed["val/loss"] == pytest.approx(whole["val/loss"])
    assert resumed["train/loss"] == pytest.approx(whole["train/loss"])


def test_a_resumed_run_folder_has_the_best_checkpoint(reference_cfg, monkeypatch) -> None:
    stop_at_step(monkeypatch, 4, signal.SIGTERM)
    with pytest.raises(SystemExit):
        train(reference_cfg("first", "optimizer.lr=0.0"))  # epoch 1 stays the best
    monkeypatch.undo()
    train(reference_cfg("second", "optimizer.lr=0.0", "trainer.resume=auto"))
    best = Path(reference_cfg("second").paths.output_dir) / "checkpoints" / "best.pt"
    assert best.is_file() and load_checkpoint(best)["epoch"] == 1


def test_a_resumed_epochs_last_step_is_not_saved_mid_epoch(reference_cfg, monkeypatch):
    """A resumed epoch counts the batches it has left: at its last step a due mid-epoch save
    waits for the epoch-end one, so a run killed in that epoch's evaluation resumes before
    the last step, never into an evaluation (and its logging) a second time."""
    every = ("trainer.checkpoint.every_n_steps=1", "trainer.checkpoint.keep_last=20")
    stop_at_step(monkeypatch, 4, signal.SIGTERM)  # epoch 2, after its first of 3 batches
    with pytest.raises(SystemExit):
        train(reference_cfg("first", *every))
    monkeypatch.undo()

    def killed_in_evaluation(self, model=None):
        raise RuntimeError("killed")

    monkeypatch.setattr(Epoch, "evaluate", killed_in_evaluation)  # epoch 2's, resumed
    with pytest.raises(RuntimeError, match="killed"):
        train(reference_cfg("second", *every, "trainer.resume=auto"))
    last = _last(reference_cfg, "second")
    assert (last["epoch"], last["batches_done"], last["step"]) == (2, 2, 5)


def test_the_config_key_leaves_out_what_a_training_does_not_compute_with(reference_cfg) -> None:
    """What trainer.resume=auto matches: another mode's settings (a release may add keys to
    them) and the allowlists do not make a training another run; its own keys do."""
    resolved = OmegaConf.to_container(reference_cfg("run"), resolve=True)
    key = config_key(resolved)
    widened = copy.deepcopy(resolved)
    widened["eval"]["a_key_a_release_adds"] = 1
    widened["allowed_targets_extra"] = ["myproject.*"]
    widened["mode"] = "eval"
    assert config_key(widened) == key
    widened["optimizer"]["lr"] = 0.5
    assert config_key(widened) != key
