"""mode=train: the training loop, on one page. Build the parts, open the run (its dir,
the loggers, the checkpoint to resume), then every epoch: a pass of the train step
(src/step.py) over the train loader, an evaluation, the epoch's logging and its checkpoint.

What this file calls by name is the engine's (docs/engine.md). The edges a loop must get
right are engine context managers and iterators used here by name: `StopRequest` (SIGTERM or
Ctrl-C: finish the step, checkpoint, exit), `NonFiniteGuard` (a NaN loss skips its step on
every DDP rank alike), `UnevenRanks` (DDP's Join while ranks stream different numbers of
batches), `positioned` (a resumed epoch goes on at its batch) and `batch_profiler`
(trainer.profile). Change the step, the logging or the order here; leave the edges be.
"""

from __future__ import annotations

import logging
import time

import torch
from omegaconf import DictConfig

from engine.core.progress import Cadence, LoggedBar
from engine.data.loaders import set_epoch
from engine.measure.timing import BatchMeter
from engine.runs.run_state import Progress, positioned
from engine.runs.summary import summarize
from engine.runs.training_run import TrainingRun
from engine.training.assemble import Components, assemble
from engine.training.batches import batches_per_epoch, mover_for
from engine.training.device import gpu_stats
from engine.training.distributed import reduce_totals, share_bad_samples
from engine.training.early_stopping import EarlyStopping
from engine.training.evaluate import evaluate
from engine.training.interrupts import StopRequest
from engine.training.loader_failures import loader_failures_named
from engine.training.nonfinite import NonFiniteGuard
from engine.training.optimization import build_optimization
from engine.training.oversubscription import SlowComputeHint
from engine.training.prefetch import device_batches, side_stream_for
from engine.training.profiling import batch_profiler
from engine.training.progress import LossWindow, epoch_line
from engine.training.starvation import StarvationHint
from engine.training.totals import PassTotals
from engine.training.uneven import UnevenRanks
from src.step import TrainStep

log = logging.getLogger(__name__)


def train(cfg: DictConfig) -> dict[str, float]:
    """Train and evaluate as `cfg` says; returns the final metrics (also in metrics.json).
    Under torchrun every rank trains; rank 0 alone writes the run's files."""
    start = time.perf_counter()
    parts = assemble(cfg)  # seeded: datasets, loaders, model (DDP under torchrun), loss, metrics
    optimizer, scheduler = build_optimization(cfg.optimizer, cfg.scheduler, parts)
    s = parts.settings
    step = TrainStep(
        parts.model, parts.criterion, optimizer, scheduler, parts.precision, s.grad_accum
    )
    with TrainingRun(cfg, parts, optimizer) as run:  # the run dir, loggers, checkpoints/
        loop = Loop(parts, step, run)
        at = run.resume(loop.saver)  # trainer.resume: weights, optimizer, RNG, where to go on
        metrics = summarize(loop.fit(at), parts.metrics, wall_s=time.perf_counter() - start)
        run.finish(metrics, step.steps)  # metrics.json, the loggers' end (HParams, ...)
    return metrics


class Loop:
    """The epochs of one training: `fit` runs them, `train_epoch` is one pass of the step."""

    def __init__(self, parts: Components, step: TrainStep, run: TrainingRun) -> None:
        self.parts, self.s, self.step, self.run = parts, parts.settings, step, run
        self.guard = NonFiniteGuard(self.s.max_nonfinite_steps, step.optimizer)
        self.window = LossWindow(parts.device)  # train/loss since the last logged point
        self.stop = StopRequest()
        self.saver = run.checkpointer(step, self.guard, self.window, self.stop)
        self.move = mover_for(parts)  # to the device, normalised there once
        self.side = side_stream_for(parts.device, self.s.device_prefetch)  # CUDA: a batch ahead
        self.hint = StarvationHint(
            self.s.starvation_threshold, self.s.max_epochs, parts.train_loader
        )
        workers = parts.train_loader.num_workers
        self.slow = SlowComputeHint(parts.device, workers)  # CPU only
        self.cadence = Cadence(self.s.log_every_n_seconds)  # progress lines, across epochs

    def fit(self, at: Progress) -> list[dict[str, float]]:
        """The epochs from `at` on, each evaluated and checkpointed; every epoch's metrics."""
        parts, s, history = self.parts, self.s, at.history
        stopping = EarlyStopping(
            s.early_stopping.patience, s.checkpoint.monitor, s.checkpoint.mode, s.max_epochs
        )
        with self.stop.installed():
            for epoch in range(at.epoch, s.max_epochs + 1):
                if stopping.fires(history):  # also a run resumed between its save and its stop
                    break
                set_epoch(parts.train_loader, epoch)  # this epoch's order and random draws
                resumed = at if epoch == at.epoch and at.mid_epoch else None  # mid-epoch save
                metrics = self.train_epoch(epoch, resumed, history)
                metrics |= evaluate(
                    parts.model,
                    parts.val_loader,
                    self.move,
                    parts.precision,
                    parts.criterion,
                    parts.metrics,
                    s.limit_val_batches,
                    self.side,
                )
                metrics |= gpu_stats(parts.device)
                share_bad_samples(parts.train_loader, parts.val_loader)  # DDP: all ranks' files
                history.append(metrics)
                self.log_epoch(epoch, metrics)
                self.saver.save(epoch, None, history, metrics=metrics)  # best.pt by the monitor
                self.run.write_history(history)
                self.stop.exit_if_requested(parts.device)  # a signal during the evaluation
        return history

    def train_epoch(self, epoch: int, resumed: Progress | None, history: list) -> dict[str, float]:
        """One pass over the train loader, or the rest of it where `resumed` (a mid-epoch
        checkpoint's progress: its batch and running sums) left off; its train/* metrics."""
        parts, s, step, loader = self.parts, self.s, self.step, self.parts.train_loader
        parts.model.train()
        timer, totals = BatchMeter(), PassTotals(self.move.device, parts.metrics)
        start = resumed.batch if resumed is not None else 0
        if resumed is not None and resumed.totals is not None:
            totals.load_state_dict(resumed.totals)
        base = totals.samples  # samples counted before this pass
        limit = None if s.limit_train_batches is None else max(0, s.limit_train_batches - start)
        batches = positioned(loader, resumed)  # a resumed epoch: its sampler skips ahead
        total = batches_per_epoch(loader, limit)  # the batches this pass yields
        bar = LoggedBar(total, f"epoch {epoch}/{s.max_epochs}", self.cadence)
        step.optimizer.zero_grad(set_to_none=True)
        done, at_boundary = start, True  # position in the epoch after the last optimizer step
        uneven = UnevenRanks(parts.model, loader)  # DDP ranks fed by a stream: Join, then align
        lockstep = not uneven.active  # all ranks at the same step: they can agree
        trace = self.run.profile_dir
        try:
            with (
                loader_failures_named(loader.dataset),  # a hung or dead worker names its file
                uneven.joined(),
                batch_profiler(s.profile and epoch == 1, trace) as profiler,
            ):
                timed = timer.timed(batches, limit)
                for i, batch in enumerate(device_batches(timed, self.move, self.side), start):
                    at_boundary = False
                    if epoch == 1 and i == 0:
                        self.run.show_batch("train/first_batch", batch)  # as the model sees it
                    self.slow.keep(batch)  # the run's first: a single-thread step is timed on it
                    self.run.record_samples(epoch, step.steps + 1, batch)  # samples.csv, if on
                    loss, logits = step.forward(batch)
                    if self.guard.allows(
                        loss, f"epoch {epoch}, batch {i} (step {step.steps})", lockstep
                    ):
                        step.backward(loss)
                        totals.add(loss, logits, batch.labels)
                        self.window.add(loss)
                    if profiler is not None:
                        profiler.step()
                    bar.update(1, samples=len(batch.labels))
                    if (i + 1) % s.grad_accum == 0:  # an accumulation group is complete
                        step.optimizer_step()
                        if step.steps % s.log_every_n_steps == 0:
                            self.log_window(bar)
                        # on_error=skip leaves entirely bad batches out: they count as done
                        done, at_boundary = i + 1 + getattr(loader, "dropped_batches", 0), True
                        # a checkpoint when due (trainer.checkpoint.*); a stop signal: save, exit
                        last = i + 1 - start == total
                        self.saver.at_step_boundary(epoch, done, history, totals, lockstep, last)
        except Exception:
            if self.stop.signum is not None and at_boundary:  # the signal hit the workers too
                self.saver.at_step_boundary(epoch, done, history, totals, lockstep)
            raise
        if timer.batches % s.grad_accum:
            step.optimizer_step()  # the last, partial accumulation group
        step.steps = uneven.align(
            step.optimizer, step.scheduler, step.precision.scaler, step.steps, timer.batches
        )
        if self.move.device.type == "cuda":
            torch.cuda.synchronize()
        reduce_totals(totals)  # train/* over every rank's samples
        bar.close()
        means = totals.means("train", "check the data, loader.batch_size and loader.drop_last.")
        return means | timer.stop(totals.samples - base).pass_metrics("train")

    def log_window(self, bar: LoggedBar) -> None:
        """train/loss (the mean since the last point) and train/lr at this optimizer step."""
        mean_loss, lr = self.window.take(), self.step.optimizer.param_groups[0]["lr"]
        self.run.loggers.scalars({"train/loss": mean_loss, "train/lr": lr}, self.step.steps)
        bar.postfix(loss=mean_loss)

    def log_epoch(self, epoch: int, metrics: dict[str, float]) -> None:
        """The epoch's points for every logger (at the step that ended it), its log line,
        and the hint when the model waited for data."""
        # train/loss is the per-step curve; the epoch's mean gets its own tag
        per_epoch = {k: v for k, v in metrics.items() if k not in ("train/samples", "train/loss")}
        per_epoch |= {"train/epoch_loss": metrics["train/loss"], "epoch": epoch}
        self.run.loggers.scalars(per_epoch, self.step.steps)
        log.info("%s", epoch_line(epoch, self.s.max_epochs, metrics))
        self.hint.check(epoch, metrics["train/data_wait_frac"])
        parts = self.parts
        self.slow.check(epoch, metrics, parts.model, parts.criterion, parts.precision)
