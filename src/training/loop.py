"""The training loop: fit = epochs of train_epoch + evaluate, with metrics out."""

from __future__ import annotations

import logging
import math
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch
from hydra.utils import instantiate
from omegaconf import DictConfig
from torch import nn
from torch.utils.data import DataLoader
from tqdm import tqdm

from src.training.batches import BatchMover, batches_per_epoch
from src.training.diagnosis import gpu_stats, starvation_hint
from src.training.evaluate import evaluate
from src.training.meters import ClassificationTotals, LoaderTimer
from src.training.profiling import batch_profiler
from src.training.settings import TrainerSettings
from src.training.tensorboard import TensorBoardLogger

if TYPE_CHECKING:
    from src.assemble import Parts

log = logging.getLogger(__name__)


def optimizer_steps_per_epoch(loader: DataLoader, settings: TrainerSettings) -> int:
    """Optimizer steps in one epoch (what the LR schedule counts), at least 1."""
    batches = batches_per_epoch(loader, settings.limit_train_batches)
    if batches is None:
        raise ValueError(
            f"the train dataset ({type(loader.dataset).__name__}) has no __len__, so the "
            "learning-rate schedule cannot know the run's length: give the dataset a __len__ "
            "or set trainer.limit_train_batches."
        )
    return max(1, math.ceil(batches / settings.grad_accum))


def build_optimization(
    optimizer_cfg: DictConfig, scheduler_cfg: DictConfig, parts: Parts
) -> tuple[torch.optim.Optimizer, torch.optim.lr_scheduler.LRScheduler]:
    """The `optimizer` over the model's parameters and the `scheduler` over the whole run."""
    optimizer = instantiate(optimizer_cfg)(parts.model.parameters())
    steps = parts.settings.max_epochs * optimizer_steps_per_epoch(
        parts.train_loader, parts.settings
    )
    return optimizer, instantiate(scheduler_cfg)(optimizer, total_steps=steps)


class Fitter:
    """Runs the epochs: forward, backward (with grad accumulation and AMP), logging."""

    def __init__(
        self,
        parts: Parts,
        optimizer: torch.optim.Optimizer,
        scheduler: torch.optim.lr_scheduler.LRScheduler,
        tb: TensorBoardLogger,
    ) -> None:
        self.parts, self.model, self.settings = parts, parts.model, parts.settings
        self.optimizer, self.scheduler, self.tb = optimizer, scheduler, tb
        self.precision = parts.precision
        normalizer = parts.pipelines.normalizer
        self.move = BatchMover(parts.device, normalizer, parts.settings.channels_last)
        self.denormalize = normalizer.denormalize
        self.step = 0
        self._hinted = False
        self._window_loss = torch.zeros((), device=parts.device)  # train/loss since last point
        self._window_batches = 0

    def train_epoch(self, loader: DataLoader, epoch: int) -> dict[str, float]:
        """One pass over the train loader; returns the epoch's train/* metrics."""
        s = self.settings
        self.model.train()
        timer = LoaderTimer()
        totals = ClassificationTotals(self.move.device)
        total = batches_per_epoch(loader, s.limit_train_batches)
        bar = tqdm(total=total, desc=f"epoch {epoch}/{s.max_epochs}", leave=False, disable=None)
        trace_dir = Path(self.tb.writer.log_dir) / "plugins" / "profile"
        self.optimizer.zero_grad(set_to_none=True)
        with batch_profiler(s.profile and epoch == 1, trace_dir) as prof:
            for i, batch in enumerate(timer.iterate(loader, s.limit_train_batches)):
                self._train_step(batch, epoch, i, totals)
                if prof is not None:
                    prof.step()
                bar.update(1)
                if (i + 1) % (s.log_every_n_steps * s.grad_accum) == 0:
                    self._log_window(bar, totals, timer)
        if timer.batches % s.grad_accum:
            self._optimizer_step()  # the last, partial accumulation group
        if self.move.device.type == "cuda":
            torch.cuda.synchronize()
        timer.stop(totals.samples)
        bar.close()
        metrics = totals.means("train", "check the data, loader.batch_size and loader.drop_last.")
        return metrics | {
            "train/samples_per_s": timer.samples_per_s,
            "train/data_wait_frac": timer.data_wait_frac,
            "train/first_batch_s": timer.first_batch_s,
            "train/epoch_s": timer.elapsed_s,
            "train/samples": totals.samples,
        }

    def _train_step(self, batch: Any, epoch: int, i: int, totals: ClassificationTotals) -> None:
        """Forward, backward and (every grad_accum batches) an optimizer step."""
        inputs, labels, extras = self.move(batch)
        if epoch == 1 and i == 0 and inputs.ndim == 4 and inputs.shape[1] in (1, 3):
            self.tb.images("train/first_batch", self.denormalize(inputs[:64]))
        with self.precision.autocast():
            logits = self.model(inputs, *extras)
            loss = nn.functional.cross_entropy(logits.float(), labels)
        scaled = loss / self.settings.grad_accum
        (self.precision.scaler.scale(scaled) if self.precision.scaler else scaled).backward()
        if (i + 1) % self.settings.grad_accum == 0:
            self._optimizer_step()
        totals.add(loss, logits, labels)
        self._window_loss += loss.detach()
        self._window_batches += 1

    def _log_window(self, bar: tqdm, totals: ClassificationTotals, timer: LoaderTimer) -> None:
        """train/loss (mean since the last point) and train/lr at the current optimizer step."""
        mean_loss = self._window_loss.item() / self._window_batches
        lr = self.optimizer.param_groups[0]["lr"]
        self.tb.scalars({"train/loss": mean_loss, "train/lr": lr}, self.step)
        bar.set_postfix(
            loss=f"{mean_loss:.4f}", samples_s=f"{totals.samples / timer.running_s():.0f}"
        )
        self._window_loss.zero_()
        self._window_batches = 0

    def state(self, epoch: int) -> dict[str, Any]:
        """What a checkpoint needs to continue training after `epoch`."""
        scaler = self.precision.scaler
        return {
            "model": self.model.state_dict(),
            "optimizer": self.optimizer.state_dict(),
            "scheduler": self.scheduler.state_dict(),
            "scaler": scaler.state_dict() if scaler is not None else None,
            "epoch": epoch,
            "step": self.step,
        }

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

    def fit(self, on_epoch_end: Callable[[int, dict[str, float]], None]) -> list[dict[str, float]]:
        """All epochs; `on_epoch_end(epoch, metrics)` runs after each (checkpointing)."""
        train_loader, val_loader = self.parts.train_loader, self.parts.val_loader
        history = []
        for epoch in range(1, self.settings.max_epochs + 1):
            for obj in (train_loader.sampler, train_loader.dataset):
                if hasattr(obj, "set_epoch"):
                    obj.set_epoch(epoch)
            metrics = self.train_epoch(train_loader, epoch)
            metrics |= evaluate(
                self.model, val_loader, self.move, self.precision, self.settings.limit_val_batches
            )
            metrics |= gpu_stats(self.parts.device)
            # train/loss is the per-step curve; the epoch mean gets its own tag (same x-axis rule)
            per_epoch = {
                k: v for k, v in metrics.items() if k not in ("train/samples", "train/loss")
            }
            self.tb.scalars(per_epoch | {"train/epoch_loss": metrics["train/loss"]}, epoch)
            log.info(
                "epoch %d/%d  train/loss %.4f  val/loss %.4f  val/acc %.4f  %.0f samples/s  "
                "data wait %.0f%%",
                epoch,
                self.settings.max_epochs,
                metrics["train/loss"],
                metrics["val/loss"],
                metrics["val/acc"],
                metrics["train/samples_per_s"],
                100 * metrics["train/data_wait_frac"],
            )
            self._diagnose(epoch, metrics["train/data_wait_frac"])
            history.append(metrics)
            on_epoch_end(epoch, metrics)
        return history

    def _diagnose(self, epoch: int, wait_frac: float) -> None:
        """Log the starvation hint once; epoch 1 (worker start-up) only judges 1-epoch runs."""
        if self._hinted or (epoch == 1 and self.settings.max_epochs > 1):
            return
        hint = starvation_hint(wait_frac, self.settings.starvation_threshold,
                               self.parts.train_loader)  # fmt: skip
        if hint is not None:
            log.warning("epoch %d: %s", epoch, hint)
            self._hinted = True
