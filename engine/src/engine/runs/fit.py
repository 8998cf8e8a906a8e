"""The epochs of a training, for a loop of the user's (src/loop.py) to drive: `Fit` resumes
and yields each `Epoch`; an epoch yields its batches and is told what the step did. What a
loop must get right lives here, behind those few calls:

- the resume position: a resumed epoch goes on at its batch, with its running sums;
- stop signals (SIGTERM, Ctrl-C): finish the step, checkpoint, exit 128 + signal;
- non-finite losses: a NaN step is skipped on every DDP rank alike;
- uneven DDP ranks fed by a stream: Join while they run, then align their step counts;
- the checkpoint boundary: mid-epoch saves only after an optimizer step, when due;
- a hung or dead loader worker names its file; trainer.profile traces epoch 1.
"""

from __future__ import annotations

import logging
import time
from collections import deque
from collections.abc import Iterator
from contextlib import ExitStack
from typing import Any

import torch
import torch.distributed as dist

from engine.core.progress import Cadence, LoggedBar
from engine.data.batch_stages import Loader
from engine.data.loaders import set_epoch
from engine.measure.timing import BatchMeter
from engine.metric_keys import is_count
from engine.runs.run_state import Progress, StepState, positioned, step_problem
from engine.runs.summary import summarize
from engine.runs.training_run import TrainingRun
from engine.training.batch_mix import hard_labels
from engine.training.batches import DeviceBatch, batches_per_epoch, mover_for
from engine.training.clipping import clip_before_each_step
from engine.training.compiled import warm_up
from engine.training.device import gpu_stats
from engine.training.distributed import (
    broadcast_module,
    ranks_differ,
    reduce_totals,
    share_bad_samples,
    unwrap,
)
from engine.training.early_stopping import EarlyStopping
from engine.training.ema import ema_keys
from engine.training.evaluate import evaluate
from engine.training.freezing import Freezer
from engine.training.interrupts import StopRequest
from engine.training.limiting_stage import limiting_stage
from engine.training.loader_failures import loader_failures_named
from engine.training.nonfinite import NonFiniteGuard
from engine.training.oversubscription import SlowComputeHint
from engine.training.pipeline_timing import (
    CSV_NAME,
    PipelineTimes,
    StageMeans,
    append_rows,
    stage_table,
)
from engine.training.prefetch import device_batches, side_stream_for
from engine.training.profiling import batch_profiler
from engine.training.progress import LossWindow, epoch_line
from engine.training.starvation import StarvationHint, starved
from engine.training.totals import PassTotals
from engine.training.uneven import UnevenRanks

log = logging.getLogger(__name__)


class Fit:
    """The training `run` of `step` (src/step.py's TrainStep: forward, backward,
    optimizer_step, steps), resumed where trainer.resume says: `epochs()` yields each epoch
    to run, `finish()` writes the final metrics. Time counts from `start` (perf_counter)."""

    def __init__(self, run: TrainingRun, step: StepState, start: float | None = None) -> None:
        unfit = step_problem(step)
        if unfit is not None:
            raise TypeError(unfit)
        parts = run.parts
        self.run, self.parts, self.s, self.step = run, parts, parts.settings, step
        self.start = time.perf_counter() if start is None else start
        self.guard = NonFiniteGuard(self.s.max_nonfinite_steps, step.optimizer)
        self.window = LossWindow(parts.device)  # train/loss since the last logged point
        self.stop = StopRequest()
        self.saver = run.checkpointer(step, self.guard, self.window, self.stop)
        self.move = mover_for(parts)  # to the device, normalised there once
        self.side = side_stream_for(parts.device, self.s.device_prefetch)  # CUDA: a batch ahead
        self.hint = StarvationHint(
            self.s.starvation_threshold, self.s.max_epochs, parts.train_loader
        )
        self.slow = SlowComputeHint(parts.device, parts.train_loader.num_workers)  # CPU only
        self.cadence = Cadence(self.s.log_every_n_seconds)  # progress lines, across epochs
        self.at = run.resume(self.saver)  # weights, optimizer, RNG, where to go on
        self.history = self.at.history
        bare = unwrap(parts.model)
        self.freezer = None  # trainer.freeze_epochs: the head alone at first
        if self.s.freeze_epochs:
            self.freezer = Freezer(
                bare, len(parts.classes), self.s.freeze_epochs, self.s.freeze_bn_stats
            )
        # the step's edges, on the optimizer's own step hooks: every step the optimizer takes
        if self.s.clip_grad_norm is not None:
            clip_before_each_step(step.optimizer, self.s.clip_grad_norm)
        if parts.ema is not None:
            ema = parts.ema
            step.optimizer.register_step_post_hook(lambda *_: ema.update(bare))
        self.compiling = self.s.compile is not None  # compiled on the run's first batch

    def epochs(self) -> Iterator[Epoch]:
        """The epochs from the resumed one on, until max_epochs or early stopping; a stop
        signal during an epoch's evaluation exits once it is checkpointed."""
        s, at = self.s, self.at
        stopping = EarlyStopping(
            s.early_stopping.patience, s.checkpoint.monitor, s.checkpoint.mode, s.max_epochs
        )
        with self.stop.installed():
            for number in range(at.epoch, s.max_epochs + 1):
                if stopping.fires(self.history):  # also a run resumed between save and stop
                    break
                set_epoch(self.parts.train_loader, number)  # this epoch's order and draws
                resumed = at if number == at.epoch and at.mid_epoch else None  # mid-epoch save
                yield Epoch(self, number, resumed)

    def finish(self) -> dict[str, float]:
        """The training's final metrics (metrics.json, the loggers' end), over every epoch."""
        wall_s = time.perf_counter() - self.start
        metrics = summarize(self.history, self.parts.metrics, wall_s=wall_s)
        self.run.finish(metrics, self.step.steps)
        return metrics


class Epoch:
    """One epoch of a Fit: `with epoch:` around the pass, `batches()` to train on, and after
    each batch's backward `count()`, after each optimizer step `stepped()`; then
    `train_metrics()`, `evaluate()` and `end(metrics)`. `number` counts from 1."""

    def __init__(self, fit: Fit, number: int, resumed: Progress | None) -> None:
        self.fit, self.number, self.resumed = fit, number, resumed
        loader = fit.parts.train_loader
        self.timer, self.totals = BatchMeter(), PassTotals(fit.move.device, fit.parts.metrics)
        # each batch's stages: read ... collate in its worker, wait, h2d and step here
        self.pipeline = PipelineTimes(fit.move.device) if fit.s.pipeline_timing else None
        self.stages: StageMeans | None = None  # the pass's, once it ended
        self.start = resumed.batch if resumed is not None else 0
        if resumed is not None and resumed.totals is not None:
            self.totals.load_state_dict(resumed.totals)
        self.base = self.totals.samples  # samples counted before this pass
        limit = fit.s.limit_train_batches
        self.limit = None if limit is None else max(0, limit - self.start)
        # positioned first: a resumed epoch's sampler skips ahead, and the count is of the rest
        self._replay = positioned(loader, resumed)
        self._positions: deque[int] = deque()  # of the batches fetched, not yet trained on
        # the positions this pass goes through, its bar's total (a replayed order's first
        # ones go by unused)
        cap = None if self.limit is None else self.limit + self._replay
        whole = batches_per_epoch(loader, cap)
        self.total = None if whole is None else whole - self._replay
        self.bar = LoggedBar(self.total, f"epoch {number}/{fit.s.max_epochs}", fit.cadence)
        self.uneven = UnevenRanks(fit.parts.model, loader)  # DDP on a stream: Join, then align
        self.lockstep = not self.uneven.active  # all ranks at the same step: they can agree
        self.done, self.at_boundary = self.start, True  # after the last optimizer step
        self.index = self.start - 1  # the position of the batch being trained on
        self.yielded = 0  # batches of this pass trained on: a resumed one starts at a step
        self._stack = ExitStack()
        self._profiler: Any = None

    def __enter__(self) -> Epoch:
        fit = self.fit
        fit.parts.model.train()
        if fit.freezer is not None and fit.freezer.apply(self.number):
            # other weights train: torch.compile compiles anew, on this epoch's first batch
            fit.compiling = fit.s.compile is not None
        fit.step.optimizer.zero_grad(set_to_none=True)
        loader = fit.parts.train_loader
        with ExitStack() as stack:  # one that fails to enter leaves the others exited
            stack.enter_context(loader_failures_named(loader.dataset))  # names the file
            stack.enter_context(self.uneven.joined())
            profile = fit.s.profile and self.number == 1
            self._profiler = stack.enter_context(batch_profiler(profile, fit.run.profile_dir))
            self._stack = stack.pop_all()
        return self

    def __exit__(
        self, kind: type[BaseException] | None, err: BaseException | None, tb: Any
    ) -> bool:
        try:
            suppressed = bool(self._stack.__exit__(kind, err, tb))
        except Exception:
            self._save_if_stopped()
            raise
        if kind is not None and issubclass(kind, Exception) and not suppressed:
            self._save_if_stopped()
        return suppressed

    def _save_if_stopped(self) -> None:
        """A stop signal that hit the loader workers too, right after a step: its checkpoint."""
        if self.fit.stop.signum is not None and self.at_boundary:
            self.fit.saver.at_step_boundary(
                self.number, self.done, self.fit.history, self.totals, self.lockstep
            )

    def batches(self) -> Iterator[DeviceBatch]:
        """The pass over the train loader (or the rest of it, where a resumed checkpoint left
        off), each batch on the device, normalised, timed."""
        fit, pipeline = self.fit, self.pipeline
        timed = self.timer.timed(self._numbered())
        if pipeline is None:
            moved = device_batches(timed, fit.move, fit.side)
        else:  # the stage times taken off each batch, the copy and the step timed
            arrived = pipeline.arrivals(timed)
            moved = pipeline.stepping(
                device_batches(arrived, pipeline.mover(fit.move), fit.side), self.start
            )
        for batch in moved:
            i, self.yielded = self._positions.popleft(), self.yielded + 1
            advance = i - self.index  # batches left out before this one count on the bar
            self.index, self.at_boundary = i, False
            if fit.parts.mix is not None:  # batch_transforms: soft targets from here on
                batch = fit.parts.mix(batch, self.number)
            if fit.compiling:  # before the step's clock starts (pipeline.step_began)
                fit.compiling = False
                self._compile(batch)
            if self.number == 1 and self.yielded == 1 and not self.start:
                fit.run.show_batch("train/first_batch", batch)  # as the model sees it
            fit.slow.keep(batch)  # the run's first: a single-thread step is timed on it
            fit.run.record_samples(self.number, fit.step.steps + 1, batch)  # samples.csv
            if pipeline is not None:
                pipeline.step_began(fit.step.steps + 1)
            yield batch
            if self._profiler is not None:
                self._profiler.step()
            self.bar.update(advance, samples=len(batch.labels))

    def _numbered(self) -> Iterator[Any]:
        """The train loader's batches of this pass, each one's position in the epoch's order
        recorded (read back in `batches()`, past the device lookahead): under on_error=skip a
        batch left out (every sample bad) keeps its place, so the position, the checkpoint's
        batches_done and trainer.limit_train_batches count the loader's batches alike in an
        uninterrupted and a resumed pass. A replayed order's first batches, up to the resumed
        position, go by unused. Under DDP in lockstep the ranks compare how many they left out
        at each fetch and at the pass's end (one all-reduce): ranks that left out other batches
        stop in one line where one would wait for another's gradients forever."""
        loader, limit = self.fit.parts.train_loader, self.fit.s.limit_train_batches
        skipping = isinstance(loader, Loader) and loader.bad_samples is not None
        agree = skipping and self.lockstep and dist.is_initialized()  # a stream: Join instead
        device = self.fit.move.device
        base = self.start - self._replay  # the position of the loader's first batch
        for n, batch in enumerate(loader):
            left_out = loader.dropped_batches if skipping else 0  # type: ignore[union-attr]
            position = base + n + left_out
            if position < self.start:
                continue  # replayed up to where the checkpoint left off
            if agree and ranks_differ(left_out, device):
                raise self._uneven()
            if limit is not None and position >= limit:
                return
            self._positions.append(position)
            yield batch
            if limit is not None and position + 1 >= limit:
                return  # no fetch past the limit
        if agree and ranks_differ(loader.dropped_batches, device):  # type: ignore[union-attr]
            raise self._uneven()  # the pass's last batches

    def _uneven(self) -> RuntimeError:
        return RuntimeError(
            f"epoch {self.number}: every sample of a train batch was unreadable and left out "
            f"(dataset.decode.on_error=skip) on some ranks and not on others (rank "
            f"{dist.get_rank()} left out {self.fit.parts.train_loader.dropped_batches}), so "  # type: ignore[union-attr]
            "their batches no longer line up, and one would wait for another's gradients "
            "forever under torchrun; the job stops instead. Fix or remove the files named "
            "above, or raise loader.batch_size or use a random order (sampler=random, "
            "loader.shuffle=true) so that no batch is all unreadable."
        )

    def _compile(self, batch: DeviceBatch) -> None:
        """trainer.compile: compile on `batch`, its time left out of the pass's."""
        fit = self.fit
        seconds = warm_up(fit.parts.model, batch.inputs, batch.extras, fit.parts.precision)
        self.timer.leave_out(seconds)
        self.bar.leave_out(seconds)
        log.info(
            "torch.compile (trainer.compile=%s): %.1f s, on the first batch before its step; "
            "not counted in pipeline/step_ms, train/samples_per_s or train/data_wait_frac",
            fit.s.compile,
            seconds,
        )

    def finite(self, loss: torch.Tensor) -> bool:
        """Whether `loss` may be backpropagated: a non-finite one is skipped (on every DDP
        rank alike) and counted, up to trainer.max_nonfinite_steps."""
        where = f"epoch {self.number}, batch {self.index} (step {self.fit.step.steps})"
        return self.fit.guard.allows(loss, where, self.lockstep)

    def count(self, loss: torch.Tensor, logits: torch.Tensor, batch: DeviceBatch) -> None:
        """Add a backpropagated batch to the pass's train/* sums and the logged loss window."""
        multi = self.fit.parts.train_set.multi_label  # a mixed batch counts its argmax
        self.totals.add(loss, logits, hard_labels(batch.labels, multi))
        self.fit.window.add(loss)

    def accumulated(self) -> bool:
        """Whether this batch completes an accumulation group (trainer.grad_accum batches)."""
        return self.yielded % self.fit.s.grad_accum == 0

    def stepped(self) -> None:
        """After an optimizer step: train/loss and train/lr when due, and a checkpoint when
        due (trainer.checkpoint.*) or when a stop signal came (then exit)."""
        fit = self.fit
        if self.pipeline is not None:
            self.pipeline.step_ended()  # the step's time ends here, before logging and saving
        if fit.step.steps % fit.s.log_every_n_steps == 0:
            self._log_window()
        self.done = self.index + 1  # a position: batches left out before it count as done
        self.at_boundary = True
        last = self.index + 1 - self.start == self.total
        fit.saver.at_step_boundary(
            self.number, self.done, fit.history, self.totals, self.lockstep, last
        )

    def _log_window(self) -> None:
        """train/loss (the mean since the last point) and train/lr at this optimizer step."""
        fit = self.fit
        # the top layer's rate: parameter groups (optimizer.layer_decay) scale theirs down
        lr = max(group["lr"] for group in fit.step.optimizer.param_groups)
        mean_loss = fit.window.take()
        points = {"train/loss": mean_loss, "train/lr": lr}
        if self.pipeline is not None:  # pipeline/<stage>_ms since the last point
            points |= self.pipeline.take().metrics()
            self._write_pipeline_rows()
        fit.run.loggers.scalars(points, fit.step.steps)
        self.bar.postfix(loss=mean_loss)

    def train_metrics(self) -> dict[str, float]:
        """The pass's train/* metrics over every rank's samples, after stepping the last,
        partial accumulation group and aligning uneven DDP ranks' step counts."""
        fit, step = self.fit, self.fit.step
        if self.yielded % fit.s.grad_accum:
            step.optimizer_step()  # the last, partial accumulation group
        step.steps = self.uneven.align(
            step.optimizer, step.scheduler, step.precision.scaler, step.steps, self.timer.batches
        )
        if fit.move.device.type == "cuda":
            torch.cuda.synchronize()
        reduce_totals(self.totals)  # train/* over every rank's samples
        self.bar.close()
        means = self.totals.means(
            "train", "check the data, loader.batch_size and loader.drop_last."
        )
        means |= self.timer.stop(self.totals.samples - self.base).pass_metrics("train")
        if self.pipeline is None:
            return means
        self.stages = self.pipeline.epoch()
        self._write_pipeline_rows()
        return means | self.stages.metrics()

    def _write_pipeline_rows(self) -> None:
        """pipeline.csv's rows of the batches known since the last write (rank 0 writes)."""
        rows = self.pipeline.rows(self.number)  # type: ignore[union-attr]
        if self.fit.run.ranks.is_main and rows:
            append_rows(self.fit.run.out / CSV_NAME, rows)

    def evaluate(self, model: torch.nn.Module | None = None) -> dict[str, float]:
        """val/* of `model` (default: the trained one, and with trainer.ema.decay its moving
        average as val/ema_*) over the val loader."""
        fit, parts = self.fit, self.fit.parts
        models = {"": model or parts.model}
        if model is None and parts.ema is not None:
            # rank 0's average, the one its checkpoint holds (ranks of a stream's uneven
            # epoch took unequal steps)
            broadcast_module(parts.ema.averaged, parameters=True)
            models["ema"] = parts.ema.model
        metrics: dict[str, float] = {}
        for name, evaluated in models.items():
            measured = evaluate(
                evaluated,
                parts.val_loader,
                fit.move,
                parts.precision,
                parts.criterion,
                parts.metrics,
                fit.s.limit_val_batches,
                fit.side,
            )
            metrics |= ema_keys(measured) if name else measured
        return metrics

    def end(self, metrics: dict[str, float]) -> None:
        """The epoch's `metrics` logged (every logger, the log line, the hints), history.csv
        and the epoch's checkpoint (best.pt by trainer.checkpoint.monitor); a stop signal
        that came during the evaluation exits here, checkpointed."""
        fit, parts = self.fit, self.fit.parts
        metrics = metrics | gpu_stats(parts.device)
        share_bad_samples(parts.train_loader, parts.val_loader)  # DDP: all ranks' files
        fit.history.append(metrics)
        self._log_epoch(metrics)
        fit.saver.save(self.number, None, fit.history, metrics=metrics)
        fit.run.write_history(fit.history)
        fit.stop.exit_if_requested(parts.device)

    def _log_epoch(self, metrics: dict[str, float]) -> None:
        """The epoch's points for every logger (at the step that ended it), its log line,
        and the hints when the model waited for data or computed far too slowly."""
        fit, parts = self.fit, self.fit.parts
        # train/loss is the per-step curve; the epoch's mean gets its own tag (pipeline/
        # <stage>_ms has its per-step points: the epoch's go in a table; the sample counts are
        # no curves: metrics.json and history.csv keep them)
        per_epoch = {
            k: v
            for k, v in metrics.items()
            if k != "train/loss" and not is_count(k) and not k.startswith("pipeline/")
        }
        per_epoch |= {"train/epoch_loss": metrics["train/loss"], "epoch": self.number}
        fit.run.loggers.scalars(per_epoch, fit.step.steps)
        limit = None
        if self.stages is not None:
            loader, pipeline = parts.train_loader, self.pipeline
            limit = limiting_stage(self.stages, loader, fit.side is not None, pipeline.uint8)  # type: ignore[union-attr]
            steps = self.stages.transform_steps()
            table = stage_table(self.stages.metrics(), steps, loader.num_workers)
            fit.run.loggers.text("pipeline/epoch", f"epoch {self.number}\n{table}", fit.step.steps)
        wait = metrics["train/data_wait_frac"]
        line = epoch_line(self.number, fit.s.max_epochs, metrics)
        if limit is not None and starved(wait, fit.s.starvation_threshold, limit):
            line += f" | {limit.line}"  # the stage that kept the model waiting
        log.info("%s", line)
        fit.hint.check(self.number, wait, limit)
        fit.slow.check(self.number, metrics, parts.model, parts.criterion, parts.precision)
