"""The training loop: fit = epochs of train_epoch + evaluate, checkpointed and resumable."""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING, Any

import torch
from torch import nn
from torch.utils.data import DataLoader
from tqdm import tqdm

from src.data.samplers import EpochSampler
from src.training.batches import DeviceBatch, batches_per_epoch, mover_for
from src.training.checkpoint import Checkpoints
from src.training.diagnosis import gpu_stats, loader_failures_named, starvation_hint
from src.training.distributed import any_rank, reduce_totals, share_bad_samples
from src.training.evaluate import evaluate
from src.training.interrupts import StopRequest
from src.training.meters import ClassificationTotals, LoaderTimer
from src.training.prefetch import device_batches, side_stream_for
from src.training.profiling import batch_profiler
from src.training.resumable import Resumable
from src.training.tensorboard import TensorBoardLogger
from src.training.uneven import UnevenRanks

if TYPE_CHECKING:
    from src.assemble import Parts

log = logging.getLogger(__name__)


class Fitter(Resumable):
    """Runs the epochs: forward, backward (grad accumulation, AMP), logging, checkpoints."""

    def __init__(
        self,
        parts: Parts,
        optimizer: torch.optim.Optimizer,
        scheduler: torch.optim.lr_scheduler.LRScheduler,
        tb: TensorBoardLogger,
        checkpoints: Checkpoints,
        run_info: dict[str, Any],
    ) -> None:
        self.parts, self.model, self.settings = parts, parts.model, parts.settings
        self.optimizer, self.scheduler, self.tb = optimizer, scheduler, tb
        self.checkpoints, self.run_info = checkpoints, run_info
        self.precision = parts.precision
        self.move = mover_for(parts)
        self.side = side_stream_for(parts.device, parts.settings.device_prefetch)
        self.denormalize = parts.pipelines.normalizer.denormalize
        self.stop = StopRequest()
        self.step = 0
        self.nonfinite = 0
        self.history: list[dict[str, float]] = []
        self.start_epoch, self.start_batch = 1, 0
        self._resumed_totals: dict[str, Any] | None = None
        self._hinted = False
        self._base_samples = 0  # samples counted before this pass (a resumed epoch's first part)
        self._lockstep = True  # False while DDP ranks run a stream's uneven batches (Join)
        self._last_save = time.monotonic()
        self._window_loss = torch.zeros((), device=parts.device)  # train/loss since last point
        self._window_batches = 0

    # -- one epoch -----------------------------------------------------------------------
    def train_epoch(self, loader: DataLoader, epoch: int, start: int = 0) -> dict[str, float]:
        """The rest of one pass over the train loader from batch `start`; its train/* metrics."""
        s = self.settings
        self.model.train()
        timer = LoaderTimer()
        totals = ClassificationTotals(self.move.device)
        if start and self._resumed_totals is not None:
            totals.load_state_dict(self._resumed_totals)
        limit = None if s.limit_train_batches is None else max(0, s.limit_train_batches - start)
        batches = self._batches_from(loader, start)
        bar = tqdm(total=batches_per_epoch(loader, limit), desc=f"epoch {epoch}/{s.max_epochs}",
                   leave=False, disable=None)  # fmt: skip
        trace_dir = self.tb.log_dir / "plugins" / "profile"
        self.optimizer.zero_grad(set_to_none=True)
        self._base_samples = totals.samples
        done, at_boundary = start, True  # position in the epoch after the last optimizer step
        uneven = UnevenRanks(self.model, loader)  # DDP ranks fed by a stream: Join, then align
        self._lockstep = not uneven.active  # all ranks at the same step: they can agree
        try:
            with (
                loader_failures_named(loader.dataset),
                uneven.joined(),
                batch_profiler(s.profile and epoch == 1, trace_dir) as prof,
            ):
                moved = device_batches(timer.iterate(batches, limit), self.move, self.side)
                for i, batch in enumerate(moved, start=start):
                    at_boundary = False
                    self._train_step(batch, epoch, i, totals)
                    if prof is not None:
                        prof.step()
                    bar.update(1)
                    if (i + 1) % s.grad_accum == 0:
                        if (i + 1) % (s.log_every_n_steps * s.grad_accum) == 0:
                            self._log_window(bar, totals, timer)
                        # on_error=skip leaves entirely bad batches out: they count as done
                        done, at_boundary = i + 1 + getattr(loader, "dropped_batches", 0), True
                        self._after_step(epoch, done, totals)
        except Exception:
            if self.stop.signum is not None and at_boundary:
                self._after_step(epoch, done, totals)  # the signal also hit the workers: save
            raise
        if timer.batches % s.grad_accum:
            self._optimizer_step()  # the last, partial accumulation group
        self.step = uneven.align(self.optimizer, self.scheduler, self.precision.scaler, self.step,
                                 timer.batches)  # fmt: skip
        if self.move.device.type == "cuda":
            torch.cuda.synchronize()
        reduce_totals(totals)  # train/* over every rank's samples
        timer.stop(totals.samples - self._base_samples)
        bar.close()
        metrics = totals.means("train", "check the data, loader.batch_size and loader.drop_last.")
        return metrics | {
            "train/samples_per_s": timer.samples_per_s,
            "train/data_wait_frac": timer.data_wait_frac,
            "train/first_batch_s": timer.first_batch_s,
            "train/epoch_s": timer.elapsed_s,
            "train/samples": timer.samples,
        }

    def _train_step(
        self, batch: DeviceBatch, epoch: int, i: int, totals: ClassificationTotals
    ) -> None:
        """Forward, backward and (every grad_accum batches) an optimizer step."""
        inputs, labels, extras = batch
        if epoch == 1 and i == 0 and inputs.ndim == 4 and inputs.shape[1] in (1, 3):
            self.tb.images("train/first_batch", self.denormalize(inputs[:64]))
        with self.precision.autocast():
            logits = self.model(inputs, *extras)
            loss = nn.functional.cross_entropy(logits.float(), labels)
        # every DDP rank must skip together, or their gradient all-reduces fall out of step
        nonfinite = not bool(torch.isfinite(loss))
        if self._lockstep:  # (under Join, extra collectives would not be matched)
            (nonfinite,) = any_rank([nonfinite], loss.device)
        if nonfinite:
            self._skip_nonfinite(loss, epoch, i)
        else:
            scaled = loss / self.settings.grad_accum
            (self.precision.scaler.scale(scaled) if self.precision.scaler else scaled).backward()
            totals.add(loss, logits, labels)
            self._window_loss += loss.detach()
            self._window_batches += 1
        if (i + 1) % self.settings.grad_accum == 0:
            self._optimizer_step()

    def _skip_nonfinite(self, loss: torch.Tensor, epoch: int, i: int) -> None:
        """Drop the step of a NaN/inf loss, or stop once trainer.max_nonfinite_steps is used."""
        self.nonfinite += 1
        self.optimizer.zero_grad(set_to_none=True)
        allowed = self.settings.max_nonfinite_steps
        value = f"is {loss.item()}" if not torch.isfinite(loss) else "is not finite on another rank"
        where = f"train loss {value} at epoch {epoch}, batch {i} (step {self.step})"
        if self.nonfinite > allowed:
            raise FloatingPointError(
                f"{where}: stopping ({self.nonfinite} non-finite losses, "
                f"trainer.max_nonfinite_steps={allowed}). Lower optimizer.lr, look at the "
                "inputs with mode=inspect, try trainer.precision=32, or allow N skipped steps "
                "with trainer.max_nonfinite_steps=N."
            )
        log.warning("%s: step skipped (%d of %d allowed)", where, self.nonfinite, allowed)

    def _log_window(self, bar: tqdm, totals: ClassificationTotals, timer: LoaderTimer) -> None:
        """train/loss (mean since the last point) and train/lr at the current optimizer step."""
        mean_loss = self._window_loss.item() / max(1, self._window_batches)
        lr = self.optimizer.param_groups[0]["lr"]
        self.tb.scalars({"train/loss": mean_loss, "train/lr": lr}, self.step)
        rate = (totals.samples - self._base_samples) / timer.running_s()
        bar.set_postfix(loss=f"{mean_loss:.4f}", samples_s=f"{rate:.0f}")
        self._window_loss.zero_()
        self._window_batches = 0

    def _optimizer_step(self) -> None:
        """Step the optimizer, then the schedule, unless fp16 loss scaling skipped the step."""
        scaler = self.precision.scaler
        stepped = True
        if scaler is not None:
            scale = scaler.get_scale()
            scaler.step(self.optimizer)
            scaler.update()
            stepped = scaler.get_scale() >= scale  # the scale drops when grads had inf/NaN
        else:
            self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)
        if stepped:
            self.scheduler.step()
        self.step += 1

    # -- all epochs ----------------------------------------------------------------------
    def fit(self) -> list[dict[str, float]]:
        """The remaining epochs; a checkpoint after each. Returns every epoch's metrics."""
        train_loader, val_loader = self.parts.train_loader, self.parts.val_loader
        with self.stop.installed():
            for epoch in range(self.start_epoch, self.settings.max_epochs + 1):
                if isinstance(train_loader.sampler, EpochSampler):
                    train_loader.sampler.set_epoch(epoch)
                train_loader.dataset.set_epoch(epoch)
                start = self.start_batch if epoch == self.start_epoch else 0
                metrics = self.train_epoch(train_loader, epoch, start)
                metrics |= evaluate(self.model, val_loader, self.move, self.precision,
                                    self.settings.limit_val_batches, self.side)  # fmt: skip
                metrics |= gpu_stats(self.parts.device)
                share_bad_samples(train_loader, val_loader)
                self._report(epoch, metrics)
                self.history.append(metrics)
                self.save(epoch, None, metrics=metrics)
                if any_rank([self.stop.signum is not None], self.parts.device)[0]:
                    raise SystemExit(self.stop.exit_code if self.stop.signum else 143)
        return self.history

    def _report(self, epoch: int, metrics: dict[str, float]) -> None:
        """TensorBoard points and the log line of one epoch; the starvation hint once."""
        # train/loss is the per-step curve; the epoch mean gets its own tag (same x-axis rule)
        per_epoch = {k: v for k, v in metrics.items() if k not in ("train/samples", "train/loss")}
        self.tb.scalars(per_epoch | {"train/epoch_loss": metrics["train/loss"]}, epoch)
        log.info(
            "epoch %d/%d  train/loss %.4f  val/loss %.4f  val/acc %.4f  %.0f samples/s  "
            "data wait %.0f%%",
            epoch, self.settings.max_epochs, metrics["train/loss"], metrics["val/loss"],
            metrics["val/acc"], metrics["train/samples_per_s"],
            100 * metrics["train/data_wait_frac"],
        )  # fmt: skip
        if self._hinted or (epoch == 1 and self.settings.max_epochs > 1):
            return  # epoch 1 (worker start-up) only judges 1-epoch runs
        wait, threshold = metrics["train/data_wait_frac"], self.settings.starvation_threshold
        hint = starvation_hint(wait, threshold, self.parts.train_loader)
        if hint is not None:
            log.warning("epoch %d: %s", epoch, hint)
            self._hinted = True
