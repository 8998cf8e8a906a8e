"""The training loop: epochs of a train pass and an evaluation, checkpointed and resumable.

The step itself is step.py (forward, loss, backward, optimizer step). Around it, each in one
place: the NaN guard (nonfinite.py), DDP's uneven streams (uneven.py), saves and stop signals at
step boundaries (checkpointing.py, interrupts.py), the loss window and the epoch line
(progress.py), the profiler (profiling.py) and batches moved ahead to the device (prefetch.py).
"""

from __future__ import annotations

import logging
import signal
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch
from torch.utils.data import DataLoader
from tqdm import tqdm

from engine.core.grid import labelled_grid
from engine.data.samplers import EpochSampler
from engine.measure.timing import BatchMeter
from engine.runs.checkpoint_files import Checkpoints
from engine.runs.history_file import write_history
from engine.runs.run_state import Checkpointer, positioned
from engine.runs.tensorboard import TensorBoardLogger
from engine.training.batches import DeviceBatch, batches_per_epoch, mover_for
from engine.training.device import gpu_stats
from engine.training.distributed import any_rank, reduce_totals, share_bad_samples
from engine.training.early_stopping import EarlyStopping
from engine.training.evaluate import evaluate
from engine.training.interrupts import StopRequest
from engine.training.loader_failures import loader_failures_named
from engine.training.nonfinite import NonFiniteGuard
from engine.training.prefetch import device_batches, side_stream_for
from engine.training.profiling import batch_profiler
from engine.training.progress import LossWindow, epoch_line
from engine.training.starvation import starvation_hint
from engine.training.totals import PassTotals
from engine.training.uneven import UnevenRanks
from src.step import TrainStep

if TYPE_CHECKING:
    from engine.training.assemble import Components

log = logging.getLogger(__name__)


class Fitter:
    """Runs the epochs of `parts` (model, loaders, loss, metrics) with `optimizer` and
    `scheduler`, logging to `tb`, saving into `checkpoints` and, given `history_file`, every
    epoch's metrics into that CSV."""

    def __init__(
        self,
        parts: Components,
        optimizer: torch.optim.Optimizer,
        scheduler: torch.optim.lr_scheduler.LRScheduler,
        tb: TensorBoardLogger,
        checkpoints: Checkpoints,
        run_info: dict[str, Any],
        history_file: Path | None = None,
    ) -> None:
        s = self.settings = parts.settings
        self.history_file = history_file  # history.csv, rewritten after every epoch
        every = s.checkpoint
        self.early_stopping = EarlyStopping(
            s.early_stopping.patience, every.monitor, every.mode, s.max_epochs
        )
        self.parts, self.model, self.tb = parts, parts.model, tb
        self.step = TrainStep(
            parts.model, parts.criterion, optimizer, scheduler, parts.precision, s.grad_accum
        )
        self.guard = NonFiniteGuard(s.max_nonfinite_steps, optimizer)
        self.checkpointer = Checkpointer(
            checkpoints, s.checkpoint, run_info, parts.model, self.step
        )
        self.move = mover_for(parts)
        self.side = side_stream_for(parts.device, s.device_prefetch)
        self.stop = StopRequest()
        self.window = LossWindow(parts.device)
        self.history: list[dict[str, float]] = []
        self.start_epoch, self.start_batch = 1, 0
        self._resumed_totals: dict[str, Any] | None = None
        self._lockstep = True  # False while DDP ranks run a stream's uneven batches (Join)
        self._hinted = False

    # -- one epoch -----------------------------------------------------------------------
    def train_epoch(self, loader: DataLoader, epoch: int, start: int = 0) -> dict[str, float]:
        """The rest of one pass over the train loader from batch `start`; its train/* metrics."""
        s, timer = self.settings, BatchMeter()
        self.model.train()
        totals = PassTotals(self.move.device, self.parts.metrics)
        if start and self._resumed_totals is not None:
            totals.load_state_dict(self._resumed_totals)
        base = totals.samples  # samples counted before this pass (a resumed epoch's first part)
        limit = None if s.limit_train_batches is None else max(0, s.limit_train_batches - start)
        bar = tqdm(
            total=batches_per_epoch(loader, limit),
            desc=f"epoch {epoch}/{s.max_epochs}",
            leave=False,
            disable=None,
        )
        self.step.optimizer.zero_grad(set_to_none=True)
        done, at_boundary = start, True  # position in the epoch after the last optimizer step
        uneven = UnevenRanks(self.model, loader)  # DDP ranks fed by a stream: Join, then align
        self._lockstep = not uneven.active  # all ranks at the same step: they can agree
        profiling = s.profile and epoch == 1
        try:
            with (
                loader_failures_named(loader.dataset),
                uneven.joined(),
                batch_profiler(profiling, self.tb.log_dir / "plugins" / "profile") as prof,
            ):
                batches = timer.timed(positioned(loader, start), limit)
                for i, batch in enumerate(device_batches(batches, self.move, self.side), start):
                    at_boundary = False
                    self._show_first_batch(batch, epoch, i)
                    loss, logits = self.step.forward(batch)
                    where = f"epoch {epoch}, batch {i} (step {self.step.steps})"
                    if self.guard.allows(loss, where, self._lockstep):
                        self.step.backward(loss)
                        totals.add(loss, logits, batch.labels)
                        self.window.add(loss)
                    if prof is not None:
                        prof.step()
                    bar.update(1)
                    if (i + 1) % s.grad_accum == 0:  # an accumulation group is complete
                        self.step.optimizer_step()
                        if self.step.steps % s.log_every_n_steps == 0:
                            self._log_window(bar, totals.samples - base, timer)
                        # on_error=skip leaves entirely bad batches out: they count as done
                        done, at_boundary = i + 1 + getattr(loader, "dropped_batches", 0), True
                        self._at_boundary(epoch, done, totals)
        except Exception:
            if self.stop.signum is not None and at_boundary:
                self._at_boundary(epoch, done, totals)  # the signal also hit the workers: save
            raise
        if timer.batches % s.grad_accum:
            self.step.optimizer_step()  # the last, partial accumulation group
        step = self.step
        step.steps = uneven.align(
            step.optimizer, step.scheduler, step.precision.scaler, step.steps, timer.batches
        )
        if self.move.device.type == "cuda":
            torch.cuda.synchronize()
        reduce_totals(totals)  # train/* over every rank's samples
        window = timer.stop(totals.samples - base)
        bar.close()
        metrics = totals.means("train", "check the data, loader.batch_size and loader.drop_last.")
        return metrics | {
            "train/samples_per_s": window.samples_per_s,
            "train/data_wait_frac": window.data_wait_frac,
            "train/first_batch_s": window.first_batch_s,
            "train/epoch_s": window.elapsed_s,
            "train/samples": window.samples,
        }

    def _show_first_batch(self, batch: DeviceBatch, epoch: int, i: int) -> None:
        """The run's first batch as the model sees it, de-normalised, each tile over its class
        name, in TensorBoard."""
        if epoch == 1 and i == 0 and batch.inputs.ndim == 4 and batch.inputs.shape[1] in (1, 3):
            denormalize = self.parts.pipelines.normalizer.denormalize
            names = [self.parts.classes[label] for label in batch.labels[:64].tolist()]
            self.tb.image("train/first_batch", labelled_grid(denormalize(batch.inputs[:64]), names))

    def _log_window(self, bar: tqdm, samples: int, timer: BatchMeter) -> None:
        """train/loss (mean since the last point) and train/lr at the current optimizer step."""
        mean_loss, lr = self.window.take(), self.step.optimizer.param_groups[0]["lr"]
        self.tb.scalars({"train/loss": mean_loss, "train/lr": lr}, self.step.steps)
        bar.set_postfix(loss=f"{mean_loss:.4f}", samples_s=f"{samples / timer.running_s():.0f}")

    def _at_boundary(self, epoch: int, done: int, totals: PassTotals) -> None:
        """At an optimizer-step boundary: obey a stop signal, or save when one is due. Under
        DDP the ranks agree first (a signal or a due save on any rank counts for all)."""
        if not self._lockstep:  # DDP over a stream: ranks are at different steps (Join), so
            if self.stop.signum is not None:  # checkpoints wait for the epoch end
                log.warning(
                    "stopped mid-epoch on a stream under DDP: resume from the last "
                    "epoch-end checkpoint with trainer.resume=auto"
                )
                raise SystemExit(self.stop.exit_code)
            return
        asked = [self.stop.signum is not None, self.checkpointer.due()]
        stop, due = any_rank(asked, self.window.total.device)
        if stop or due:
            self.checkpointer.save(epoch, done, self._counters(), totals)
        if stop:
            log.warning(
                "stopped at epoch %d, batch %d; continue with trainer.resume=auto", epoch, done
            )
            raise SystemExit(self.stop.exit_code if self.stop.signum else 128 + signal.SIGTERM)

    # -- all epochs ----------------------------------------------------------------------
    def fit(self) -> list[dict[str, float]]:
        """The remaining epochs; a checkpoint after each. Returns every epoch's metrics."""
        parts = self.parts
        if self.early_stopping.fires(self.history):
            return self.history  # resumed between the last epoch's save and its stop
        with self.stop.installed():
            for epoch in range(self.start_epoch, self.settings.max_epochs + 1):
                if isinstance(parts.train_loader.sampler, EpochSampler):
                    parts.train_loader.sampler.set_epoch(epoch)
                parts.train_loader.dataset.set_epoch(epoch)
                start = self.start_batch if epoch == self.start_epoch else 0
                metrics = self.train_epoch(parts.train_loader, epoch, start)
                metrics |= evaluate(
                    self.model,
                    parts.val_loader,
                    self.move,
                    parts.precision,
                    parts.criterion,
                    parts.metrics,
                    self.settings.limit_val_batches,
                    self.side,
                )
                metrics |= gpu_stats(parts.device)
                share_bad_samples(parts.train_loader, parts.val_loader)
                self._report(epoch, metrics)
                self.history.append(metrics)
                self.checkpointer.save(epoch, None, self._counters(), metrics=metrics)
                if self.history_file is not None:
                    write_history(self.history_file, self.history)
                if any_rank([self.stop.signum is not None], parts.device)[0]:
                    raise SystemExit(self.stop.exit_code if self.stop.signum else 143)
                if self.early_stopping.fires(self.history):
                    break
        return self.history

    def _counters(self) -> dict[str, Any]:
        """The loop's own state a checkpoint keeps besides the step's."""
        return {
            "nonfinite": self.guard.count,
            "window": self.window.state(),
            "history": self.history,
        }

    def restore(self, state: dict[str, Any]) -> None:
        """Continue from a checkpoint the Checkpointer wrote."""
        point = self.checkpointer.restore(state)
        self.start_epoch, self.start_batch = point["start_epoch"], point["start_batch"]
        self._resumed_totals = point["totals"]
        counters = point["counters"]
        self.guard.count, self.history = counters["nonfinite"], list(counters["history"])
        self.window.load(counters["window"])

    def _report(self, epoch: int, metrics: dict[str, float]) -> None:
        """TensorBoard points and the log line of one epoch; the starvation hint once."""
        # train/loss is the per-step curve; the epoch mean gets its own tag (same x-axis rule)
        per_epoch = {k: v for k, v in metrics.items() if k not in ("train/samples", "train/loss")}
        self.tb.scalars(per_epoch | {"train/epoch_loss": metrics["train/loss"]}, epoch)
        log.info("%s", epoch_line(epoch, self.settings.max_epochs, metrics))
        if self._hinted or (epoch == 1 and self.settings.max_epochs > 1):
            return  # epoch 1 (worker start-up) only judges 1-epoch runs
        wait, threshold = metrics["train/data_wait_frac"], self.settings.starvation_threshold
        hint = starvation_hint(wait, threshold, self.parts.train_loader)
        if hint is not None:
            log.warning("epoch %d: %s", epoch, hint)
            self._hinted = True
