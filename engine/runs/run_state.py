"""What a training checkpoint holds and how a run continues from it: weights, optimizer,
schedule, loss scale, position in the epoch, the loop's counters, and every rank's RNG streams
and running totals, so a resumed run draws the very batches and numbers it would have."""

from __future__ import annotations

import itertools
import logging
import time
from collections.abc import Iterable
from typing import Any, Protocol

import torch
from torch import nn
from torch.utils.data import DataLoader

from engine.core.seeding import restore_rng_states, rng_states
from engine.data.samplers import EpochSampler
from engine.runs.checkpoint_files import Checkpoints
from engine.training.device import Precision
from engine.training.distributed import current_ranks, gather_objects
from engine.training.settings import CheckpointSettings
from engine.training.totals import PassTotals

log = logging.getLogger(__name__)


class StepState(Protocol):
    """What a checkpoint keeps of the template's train step (src/step.py): its optimizer,
    schedule, precision (the fp16 loss scaler) and optimizer-step count."""

    optimizer: torch.optim.Optimizer
    scheduler: torch.optim.lr_scheduler.LRScheduler
    precision: Precision
    steps: int


class Checkpointer:
    """Saves the training state into `checkpoints` and restores it; `due` says when a
    mid-epoch save is owed (trainer.checkpoint.every_n_steps / every_minutes)."""

    def __init__(
        self,
        checkpoints: Checkpoints,
        every: CheckpointSettings,
        run_info: dict[str, Any],
        model: nn.Module,
        step: StepState,
    ) -> None:
        self.checkpoints, self.every, self.run_info = checkpoints, every, run_info
        self.model, self.step = model, step
        self._last_save = time.monotonic()

    def due(self) -> bool:
        """Whether a save is owed at this optimizer step."""
        minutes = (time.monotonic() - self._last_save) / 60
        n, limit = self.every.every_n_steps, self.every.every_minutes
        return bool(n and self.step.steps % n == 0) or bool(limit and minutes >= limit)

    def save(
        self,
        epoch: int,
        batches_done: int | None,
        counters: dict[str, Any],
        totals: PassTotals | None = None,
        metrics: dict[str, float] | None = None,
    ) -> None:
        """Checkpoint everything needed to continue: mid-epoch, or (batches_done None) after
        the epoch and its validation. `counters` are the loop's own (nonfinite, window,
        history); `metrics` (epoch ends) may make it best.pt."""
        scaler = self.step.precision.scaler
        state = (
            self.run_info
            | counters
            | {
                "model": self.model.state_dict(),
                "optimizer": self.step.optimizer.state_dict(),
                "scheduler": self.step.scheduler.state_dict(),
                "scaler": scaler.state_dict() if scaler is not None else None,
                "epoch": epoch,
                "batches_done": batches_done,
                "step": self.step.steps,
                # per rank (index = rank): generators and a part-done epoch's running totals
                "ranks": gather_objects(
                    {"rng": rng_states(), "totals": totals.state_dict() if totals else None}
                ),
            }
        )
        self.checkpoints.save(state, metrics)
        self._last_save = time.monotonic()

    def restore(self, state: dict[str, Any]) -> dict[str, Any]:
        """Load weights, optimizer, schedule, loss scale, step count and this rank's RNG
        streams from `state`; returns what the loop continues from: `start_epoch`,
        `start_batch`, `totals` (a part-done epoch's sums, or None) and its counters."""
        self.model.load_state_dict(state["model"])
        self.step.optimizer.load_state_dict(state["optimizer"])
        self.step.scheduler.load_state_dict(state["scheduler"])
        scaler = self.step.precision.scaler
        if scaler is not None and state["scaler"] is not None:
            scaler.load_state_dict(state["scaler"])
        self.step.steps = state["step"]
        self.checkpoints.best = state["best"]
        own = state["ranks"][current_ranks().rank]
        restore_rng_states(own["rng"])
        epoch_done = state["batches_done"] is None
        return {
            "start_epoch": state["epoch"] + 1 if epoch_done else state["epoch"],
            "start_batch": 0 if epoch_done else state["batches_done"],
            "totals": own["totals"],
            "counters": {key: state[key] for key in ("nonfinite", "window", "history")},
        }


def positioned(loader: DataLoader, start: int) -> Iterable[Any]:
    """The loader positioned at batch `start`: the sampler skips ahead where it can, other
    orders are replayed and the first `start` batches dropped (same batches, slower)."""
    if start == 0:
        return loader
    if isinstance(loader.sampler, EpochSampler) and loader.batch_size is not None:
        # a stop after the epoch's last (partial) batch: nothing left but validation
        loader.sampler.skip(min(start * loader.batch_size, loader.sampler.share_size()))
        return loader
    log.info("resuming mid-epoch: replaying %d batches of this order", start)
    return itertools.islice(loader, start, None)
