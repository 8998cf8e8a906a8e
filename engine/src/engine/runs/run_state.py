"""What a training checkpoint holds and how a run continues from it: weights, optimizer,
schedule, loss scale, position in the epoch, the loop's counters, and every rank's RNG streams
and running totals, so a resumed run draws the very batches and numbers it would have."""

from __future__ import annotations

import logging
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

import numpy as np
import torch
from torch import nn
from torch.utils.data import DataLoader

from engine.core.seeding import restore_rng_states, rng_states
from engine.data.samplers import EpochSampler
from engine.runs.checkpoint_checks import STEP_KEY
from engine.runs.checkpoint_files import Checkpoints
from engine.runs.checkpoint_weights import EMA_KEY
from engine.runs.stream_resume import KEY as STREAM_TRAINED
from engine.training.device import Precision
from engine.training.distributed import any_rank, current_ranks, gather_objects
from engine.training.ema import WeightsEma
from engine.training.interrupts import StopRequest
from engine.training.nonfinite import NonFiniteGuard
from engine.training.progress import LossWindow
from engine.training.settings import CheckpointSettings
from engine.training.totals import PassTotals, sum_states

log = logging.getLogger(__name__)


@runtime_checkable
class StepState(Protocol):
    """What the engine uses of the template's train step (src/step.py): its optimizer,
    schedule, precision (the fp16 loss scaler) and optimizer-step count, which a checkpoint
    keeps, and `optimizer_step()`, which `Epoch.train_metrics()` calls for a last, partial
    accumulation group. Its own `state_dict()` (an EMA of the weights, a second optimizer) is
    saved too and handed back to its `load_state_dict()` on resume, where it has them (a step
    written before engine 2.0 has not: so they are not members here)."""

    optimizer: torch.optim.Optimizer
    scheduler: torch.optim.lr_scheduler.LRScheduler
    precision: Precision
    steps: int

    def optimizer_step(self) -> None: ...


STEP_MEMBERS = ("optimizer", "scheduler", "precision", "steps", "optimizer_step")


@runtime_checkable
class Step(Protocol):
    """The step class train.py hands to `engine.app.run(step=...)` (src/step.py's TrainStep):
    `optimizer_step()`, which `Epoch.train_metrics()` calls for a last, partial accumulation
    group, and `__call__(batch)`, one whole step, which mode=benchmark with
    benchmark.compute=model times. Before any work a run checks the method it will call
    (`CALLED`); a step that lacks one the run never calls still runs. Its instances are
    StepStates (their attributes are set in `__init__`, so Fit checks them on the instance)."""

    def optimizer_step(self) -> None: ...

    def __call__(self, batch: Any) -> torch.Tensor: ...


# what of the Step protocol the engine itself calls in a run: mode=train, optimizer_step()
# for an epoch's last, partial accumulation group; mode=benchmark with benchmark.compute=model,
# step(batch) for one whole step; nothing in the other modes (the user's loop calls the rest)
CALLED = {
    ("train", None): ("optimizer_step", "for an epoch's last, partial accumulation group"),
    ("benchmark", "model"): ("__call__", "(step(batch)) for one whole step it times"),
}


def step_class_problem(step: type, mode: str, compute: str | None = None) -> str | None:
    """Why the class `step` lacks the method of the Step protocol that the engine calls in
    this run (`mode`; mode=benchmark's `compute`: benchmark.compute), or None."""
    called = CALLED.get((mode, compute if mode == "benchmark" else None))
    if called is None or not isinstance(step, type) or issubclass(step, Step):
        return None  # a factory function is checked on what it makes (Fit, mode=benchmark)
    name, why = called
    if any(name in vars(base) for base in step.__mro__):  # not the metaclass's __call__
        return None
    where = "mode=benchmark with benchmark.compute=model" if mode == "benchmark" else "mode=train"
    return (
        f"{where}: the step class {step.__module__}.{step.__qualname__} given to "
        f"engine.app.run(step=...) in train.py lacks {name}(), which the engine calls {why} "
        f"(engine.api.Step); define {name}() as src/step.py's TrainStep does."
    )


def step_problem(step: object) -> str | None:
    """Why `step` is no StepState, naming what it lacks (isinstance alone cannot say), or
    None; checked when a training starts, not at the first checkpoint or epoch's end."""
    if isinstance(step, StepState):
        return None
    missing = [name for name in STEP_MEMBERS if not hasattr(step, name)]
    kind = type(step)
    return (
        f"the train step {kind.__module__}.{kind.__qualname__} lacks {', '.join(missing)}: the "
        "engine reads its optimizer, scheduler, precision and steps (a checkpoint keeps them) "
        "and calls optimizer_step() for an epoch's last, partial accumulation group "
        "(engine.runs.run_state.StepState); src/step.py's TrainStep has each."
    )


def step_state(step: StepState) -> dict[str, Any]:
    """The step's own state_dict(); {} for a step written before engine 2.0, which had none."""
    state_dict = getattr(step, "state_dict", None)
    return state_dict() if state_dict is not None else {}


@dataclass
class Progress:
    """Where a training stands: the epoch to run (1 = the first), the batches of it already
    done (this run's batches), every finished epoch's metrics, mid-epoch this rank's running
    sums of it, and the positions of the epoch's order the whole job has used (an
    EpochSampler's; None: the first `batch` batches are replayed), or for a stream resumed on
    another topology the samples (a bool per split index) the epoch trained on, left out of
    its rest (engine/runs/stream_resume.py)."""

    epoch: int = 1
    batch: int = 0
    history: list[dict[str, float]] = field(default_factory=list)
    totals: dict[str, Any] | None = None
    samples: int | None = None
    trained: np.ndarray | None = None

    @property
    def mid_epoch(self) -> bool:
        """Whether part of the epoch `epoch` is done."""
        return self.batch > 0 or bool(self.samples)


class Checkpointer:
    """Saves the training state into `checkpoints` and restores it: the model, the step's
    optimizer, schedule, loss scale, step count and own state_dict(), the NaN guard's count, the loss window,
    the history and the position in the epoch. `due` says when a mid-epoch save is owed
    (trainer.checkpoint.every_n_steps / every_minutes); `stop` is the run's stop request;
    `flush` puts what was logged so far on disk before each save (TensorBoard), so no point
    a checkpoint counts as written is lost to a kill; `used(batches)` is how many positions
    of the epoch's order the job has used at that batch (None: a replayed order);
    `trained(epoch)` is, for a stream, which samples of `epoch` the job trained on so far
    (engine/runs/stream_resume.py; None: not a stream, or unknown)."""

    def __init__(
        self,
        checkpoints: Checkpoints,
        every: CheckpointSettings,
        run_info: dict[str, Any],
        model: nn.Module,
        step: StepState,
        guard: NonFiniteGuard,
        window: LossWindow,
        stop: StopRequest,
        flush: Callable[[], None],
        used: Callable[[int], int | None],
        trained: Callable[[int], dict[str, Any] | None] = lambda epoch: None,
        ema: WeightsEma | None = None,
    ) -> None:
        self.ema = ema
        self.checkpoints, self.every, self.run_info = checkpoints, every, run_info
        self.model, self.step, self.guard, self.window = model, step, guard, window
        self.stop, self.flush, self.used, self.trained = stop, flush, used, trained
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
        history: list[dict[str, float]],
        totals: PassTotals | None = None,
        metrics: dict[str, float] | None = None,
    ) -> None:
        """Checkpoint everything needed to continue: mid-epoch, or (batches_done None) after
        the epoch and its validation; `metrics` (epoch ends) may make it best.pt."""
        self.flush()
        scaler = self.step.precision.scaler
        state = self.run_info | {
            "nonfinite": self.guard.count,
            "window": self.window.state(),
            "history": history,
            "model": self.model.state_dict(),
            "optimizer": self.step.optimizer.state_dict(),
            "scheduler": self.step.scheduler.state_dict(),
            "scaler": scaler.state_dict() if scaler is not None else None,
            "epoch": epoch,
            "batches_done": batches_done,
            "samples_done": None if batches_done is None else self.used(batches_done),
            STREAM_TRAINED: None if batches_done is None else self.trained(epoch),
            "step": self.step.steps,
            STEP_KEY: step_state(self.step),
            EMA_KEY: self.ema.state_dict() if self.ema is not None else None,
            # per rank (index = rank): generators and a part-done epoch's running totals
            "ranks": gather_objects(
                {"rng": rng_states(), "totals": totals.state_dict() if totals else None}
            ),
        }
        self.checkpoints.save(state, metrics)
        self._last_save = time.monotonic()

    def restore(self, state: dict[str, Any]) -> Progress:
        """Load weights, optimizer, schedule, loss scale, step count, the guard's count, the
        loss window and this rank's RNG streams from `state`; returns where to go on."""
        self.model.load_state_dict(state["model"])
        self.step.optimizer.load_state_dict(state["optimizer"])
        self.step.scheduler.load_state_dict(state["scheduler"])
        scaler = self.step.precision.scaler
        if scaler is not None and state["scaler"] is not None:
            scaler.load_state_dict(state["scaler"])
        self.step.steps = state["step"]
        loads = getattr(self.step, "load_state_dict", None)  # a step from before engine 2.0
        if STEP_KEY in state and loads is not None:  # absent from checkpoints before 2.0
            loads(state[STEP_KEY])
        if self.ema is not None:
            self._restore_ema(state.get(EMA_KEY))
        self.checkpoints.best = state["best"]
        ranks, saved = current_ranks(), state["ranks"]
        if ranks.rank < len(saved):  # more ranks than the checkpoint's: new ones keep theirs
            restore_rng_states(saved[ranks.rank]["rng"])
        self.guard.count = state["nonfinite"]
        self.window.load(state["window"])
        if state["batches_done"] is None:  # saved after the epoch and its validation
            return Progress(state["epoch"] + 1, 0, list(state["history"]))
        if len(saved) == ranks.world_size:
            totals = saved[ranks.rank]["totals"]
        else:  # another world: rank 0 carries every saved rank's sums (they are all added)
            totals = sum_states([r["totals"] for r in saved]) if ranks.rank == 0 else None
        history = list(state["history"])
        return Progress(state["epoch"], state["batches_done"], history, totals)

    def _restore_ema(self, saved: dict[str, Any] | None) -> None:
        """The EMA the checkpoint holds; one that holds none (its run had trainer.ema.decay
        null) starts the average at the resumed weights, with a warning."""
        assert self.ema is not None
        if saved is not None:
            self.ema.load_state_dict(saved)
            return
        self.ema.load_state_dict({"weights": self.model.state_dict(), "updates": 0})
        log.warning(
            "the resumed checkpoint holds no EMA of the weights (its run had trainer.ema.decay "
            "null): the average starts at the resumed weights"
        )

    def at_step_boundary(
        self,
        epoch: int,
        done: int,
        history: list[dict[str, float]],
        totals: PassTotals,
        lockstep: bool,
        last: bool = False,
    ) -> None:
        """After an optimizer step (`done` batches into `epoch`): save when a save is due or a
        stop signal came, then on a signal exit 128 + signal. Under DDP the ranks agree first
        (a signal or a due save on any rank counts for all); while they run a stream's uneven
        batches (not `lockstep`) they cannot, so a stop exits at once (the epoch-end
        checkpoint is the one to resume) and saves wait for the epoch end. After the pass's
        `last` step a due save waits too: the epoch-end checkpoint follows its evaluation, and
        a mid-epoch one here would be resumed by evaluating the epoch again, so logging its
        points a second time (TensorBoard keeps what was written at the checkpoint's step)."""
        stop = self.stop
        if not lockstep:
            if stop.signum is not None:
                log.warning(
                    "stopped mid-epoch on a stream under DDP: resume from the last "
                    "epoch-end checkpoint with trainer.resume=auto"
                )
                raise SystemExit(stop.exit_code)
            return
        asked = [stop.signum is not None, self.due() and not last]
        stopping, due = any_rank(asked, self.window.total.device)
        if stopping or due:
            self.save(epoch, done, history, totals)
        if stopping:
            log.warning(
                "stopped at epoch %d, batch %d; continue with trainer.resume=auto", epoch, done
            )
            raise SystemExit(stop.exit_code if stop.signum else 128 + signal.SIGTERM)


def positioned(loader: DataLoader, at: Progress | None) -> int:
    """Position `loader` where `at` (a resumed epoch's progress; None: its start) left off;
    returns how many of its first batches the caller replays unused. An EpochSampler skips
    the positions of its order the job used, a stream resumed on another topology leaves out
    the samples `at.trained` (`resume_without`); other orders are replayed (same batches,
    slower): their first `at.batch` positions go by (engine/runs/fit.py Epoch._numbered)."""
    if at is None or not at.mid_epoch:
        return 0
    if at.trained is not None:
        loader.dataset.resume_without(at.epoch, at.trained)  # type: ignore[attr-defined]
        log.info("resuming mid-epoch: %d samples of it trained on are left out", at.trained.sum())
        return 0
    if isinstance(loader.sampler, EpochSampler) and at.samples is not None:
        loader.sampler.skip(at.samples)
        return 0
    log.info("resuming mid-epoch: replaying %d batches of this order", at.batch)
    return at.batch
