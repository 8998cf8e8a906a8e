"""One training step, as a paper writes it: forward, loss, backward, and every `grad_accum`
batches an optimizer step and a schedule step. The loop (loop.py) adds the edges: the NaN
guard, DDP agreement, checkpoints, stop signals, logging and profiling.

Every checkpoint keeps the model, `optimizer`, `scheduler`, the fp16 loss scale and `steps`;
what else the step holds (an EMA of the weights, a second optimizer) goes in its
`state_dict()`, which a checkpoint saves too and a resume hands back to `load_state_dict()`.
Under torchrun `model` is its DDP wrapper: keep the EMA of the bare model,
`AveragedModel(unwrap(model))` (engine.api.unwrap; the engine manual's engine.md: make docs).

What the engine relies on: the class has `optimizer_step()`, which `epoch.train_metrics()`
calls itself for an epoch's last, partial accumulation group, and `__call__(batch)`
(engine.api.Step, checked before any work); an instance has `optimizer`, `scheduler`,
`precision` and `steps` (engine.api.StepState, checked when `Fit` starts). mode=benchmark
(benchmark.compute=model) builds this class by position, `TrainStep(model, criterion,
optimizer, scheduler, precision)` (grad_accum left at 1; engine/modes/benchmark.py's
`train_step`), and times `__call__` on each batch: keep those five parameters first."""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from engine.api import DeviceBatch, Precision


class TrainStep:
    """The step of one batch for `model` under the loss group's `criterion`; `steps` counts the
    optimizer steps taken (what schedules, logging and checkpoints count)."""

    def __init__(
        self,
        model: nn.Module,
        criterion: nn.Module,
        optimizer: torch.optim.Optimizer,
        scheduler: torch.optim.lr_scheduler.LRScheduler,
        precision: Precision,
        grad_accum: int = 1,
    ) -> None:
        self.model, self.criterion = model, criterion
        self.optimizer, self.scheduler = optimizer, scheduler
        self.precision, self.grad_accum = precision, grad_accum
        self.steps = 0

    def forward(self, batch: DeviceBatch) -> tuple[torch.Tensor, torch.Tensor]:
        """The batch's mean loss and logits (under autocast for mixed precision)."""
        inputs, labels, extras = batch
        with self.precision.autocast():
            logits = self.model(inputs, *extras)
            loss = self.criterion(logits, labels)
        return loss, logits

    def backward(self, loss: torch.Tensor) -> None:
        """Add this batch's share of the gradient (scaled for fp16, divided for accumulation)."""
        scaled = loss / self.grad_accum
        scaler = self.precision.scaler
        (scaler.scale(scaled) if scaler is not None else scaled).backward()

    def optimizer_step(self) -> None:
        """Step the optimizer, then the schedule (unless fp16 loss scaling skipped the step
        for inf/NaN gradients), and clear the gradients. The loop calls it every `grad_accum`
        batches; `epoch.train_metrics()` calls it too, for an epoch's last, partial group."""
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
        self.steps += 1

    def state_dict(self) -> dict[str, Any]:
        """The step's own state beyond what every checkpoint keeps (none here), e.g.
        `{"ema": self.ema.state_dict()}`."""
        return {}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore what `state_dict()` returned (a checkpoint from before it held more: the
        new parts keep their start values)."""

    def __call__(self, batch: DeviceBatch) -> torch.Tensor:
        """A whole step on one batch (grad_accum 1): forward, backward, optimizer step; what
        mode=benchmark times (src/loop.py calls the parts itself)."""
        loss, _ = self.forward(batch)
        self.backward(loss)
        self.optimizer_step()
        return loss
