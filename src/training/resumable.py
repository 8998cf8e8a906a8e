"""Checkpointing and resuming the training loop: position, weights, optimizer, RNG."""

from __future__ import annotations

import itertools
import logging
import signal
import time
from collections.abc import Iterable
from typing import Any

import torch
from torch.utils.data import DataLoader

from src.data.samplers import EpochSampler
from src.training.checkpoint import Checkpoints
from src.training.device import Precision
from src.training.distributed import any_rank, current_ranks, gather_objects
from src.training.interrupts import StopRequest
from src.training.meters import ClassificationTotals
from src.training.settings import TrainerSettings
from src.utils.seeding import restore_rng_states, rng_states

log = logging.getLogger(__name__)


class Resumable:
    """The checkpoint half of `Fitter`: what is saved at step boundaries and epoch ends, and
    how a run continues from it (the same batches, RNG streams and running totals)."""

    settings: TrainerSettings
    model: torch.nn.Module
    optimizer: torch.optim.Optimizer
    precision: Precision
    scheduler: torch.optim.lr_scheduler.LRScheduler
    checkpoints: Checkpoints
    run_info: dict[str, Any]
    stop: StopRequest
    step: int
    nonfinite: int
    history: list[dict[str, float]]
    start_epoch: int
    start_batch: int
    _resumed_totals: dict[str, Any] | None
    _last_save: float
    _window_loss: torch.Tensor
    _window_batches: int
    _lockstep: bool

    def _after_step(self, epoch: int, batches_done: int, totals: ClassificationTotals) -> None:
        """At an optimizer-step boundary: obey a stop signal, or save when one is due. Under
        DDP the ranks agree first (a signal or a due save on any rank counts for all)."""
        every = self.settings.checkpoint
        minutes = (time.monotonic() - self._last_save) / 60
        due = bool(every.every_n_steps and self.step % every.every_n_steps == 0) or bool(
            every.every_minutes and minutes >= every.every_minutes
        )
        if not self._lockstep:  # DDP over a stream: ranks are at different steps (Join), so
            if self.stop.signum is not None:  # checkpoints wait for the epoch end
                log.warning("stopped mid-epoch on a stream under DDP: resume from the last "
                            "epoch-end checkpoint with trainer.resume=auto")  # fmt: skip
                raise SystemExit(self.stop.exit_code)
            return
        stop, due = any_rank([self.stop.signum is not None, due], self._window_loss.device)
        if stop or due:
            self.save(epoch, batches_done, totals)
        if stop:
            log.warning("stopped at epoch %d, batch %d; continue with trainer.resume=auto",
                        epoch, batches_done)  # fmt: skip
            raise SystemExit(self.stop.exit_code if self.stop.signum else 128 + signal.SIGTERM)

    def save(
        self,
        epoch: int,
        batches_done: int | None,
        totals: ClassificationTotals | None = None,
        metrics: dict[str, float] | None = None,
    ) -> None:
        """Checkpoint everything needed to continue: mid-epoch, or (batches_done None) after
        the epoch and its validation."""
        scaler = self.precision.scaler
        state = self.run_info | {
            "model": self.model.state_dict(),
            "optimizer": self.optimizer.state_dict(),
            "scheduler": self.scheduler.state_dict(),
            "scaler": scaler.state_dict() if scaler is not None else None,
            "epoch": epoch,
            "batches_done": batches_done,
            "step": self.step,
            "nonfinite": self.nonfinite,
            "window": (self._window_loss, self._window_batches),
            "history": self.history,
            # per rank (index = rank): generators and a part-done epoch's running totals
            "ranks": gather_objects(
                {"rng": rng_states(), "totals": totals.state_dict() if totals else None}
            ),
        }
        self.checkpoints.save(state, metrics)
        self._last_save = time.monotonic()

    def restore(self, state: dict[str, Any]) -> None:
        """Continue from a checkpoint `save` wrote (weights, optimizer, position, RNG)."""
        self.model.load_state_dict(state["model"])
        self.optimizer.load_state_dict(state["optimizer"])
        self.scheduler.load_state_dict(state["scheduler"])
        scaler = self.precision.scaler
        if scaler is not None and state["scaler"] is not None:
            scaler.load_state_dict(state["scaler"])
        self.step, self.nonfinite = state["step"], state["nonfinite"]
        self.history = list(state["history"])
        self._window_loss.copy_(state["window"][0])
        self._window_batches = state["window"][1]
        self.checkpoints.best = state["best"]
        if state["batches_done"] is None:
            self.start_epoch, self.start_batch = state["epoch"] + 1, 0
        else:
            self.start_epoch, self.start_batch = state["epoch"], state["batches_done"]
        own = state["ranks"][current_ranks().rank]
        self._resumed_totals = own["totals"]
        restore_rng_states(own["rng"])

    @staticmethod
    def _batches_from(loader: DataLoader, start: int) -> Iterable[Any]:
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
