"""The reference project's step: plain fp32 or autocast, gradient accumulation, and an EMA
of the weights in its state_dict(), which every checkpoint saves and a resume restores."""

from __future__ import annotations

from typing import Any

import torch
from torch import nn
from torch.optim.swa_utils import AveragedModel, get_ema_multi_avg_fn

from engine.training.batches import DeviceBatch
from engine.training.device import Precision
from engine.training.distributed import unwrap


class EmaStep:
    """forward / backward / optimizer_step for the engine's Epoch, with `steps` counted."""

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
        # of the bare model: under torchrun `model` is its DDP wrapper, whose copy is no model
        self.ema = AveragedModel(unwrap(model), multi_avg_fn=get_ema_multi_avg_fn(0.9))
        self.steps = 0

    def forward(self, batch: DeviceBatch) -> tuple[torch.Tensor, torch.Tensor]:
        inputs, labels, _ = batch
        with self.precision.autocast():
            logits = self.model(inputs)
        return self.criterion(logits.float(), labels), logits

    def backward(self, loss: torch.Tensor) -> None:
        (loss / self.grad_accum).backward()

    def optimizer_step(self) -> None:
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)
        self.scheduler.step()
        self.ema.update_parameters(unwrap(self.model))
        self.steps += 1

    def state_dict(self) -> dict[str, Any]:
        return {"ema": self.ema.state_dict()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.ema.load_state_dict(state["ema"])

    def __call__(self, batch: DeviceBatch) -> torch.Tensor:
        """One whole step (mode=benchmark times it)."""
        loss, _ = self.forward(batch)
        self.backward(loss)
        self.optimizer_step()
        return loss
