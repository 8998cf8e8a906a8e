"""`trainer.ema.decay`: an exponential moving average of the model's weights, evaluated each
epoch as `val/ema_<metric>` beside the trained weights, saved in every checkpoint and resumed
exactly.

torch's own `AveragedModel` keeps the average (of the bare model: under torchrun not of its
DDP wrapper, and a copy made before torch.compile, so it is evaluated eagerly), buffers
included (BatchNorm statistics), as torchvision's classification reference does. What it adds
is TensorFlow's warm-up (`tf.train.ExponentialMovingAverage(num_updates=...)`, timm's
ModelEmaV3 alike): after n updates the decay is min(decay, (1 + n) / (10 + n)), so the first
averages are not held back toward the random or pretrained start for thousands of steps.
It is updated after every optimizer step the optimizer takes (its step hook: a step that fp16
loss scaling skips is no update), the same on every DDP rank, whose weights agree.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn
from torch.optim.swa_utils import AveragedModel

from engine.metric_keys import EMA_PREFIX


def ema_keys(metrics: dict[str, float]) -> dict[str, float]:
    """The EMA's val/* scores as val/ema_*: val/acc -> val/ema_acc (its evaluation's speed is
    the trained model's: left out)."""
    return {
        EMA_PREFIX + key.removeprefix("val/"): value
        for key, value in metrics.items()
        if not key.endswith("/samples_per_s")
    }


class WeightsEma:
    """The moving average of `model`'s weights at `decay` per optimizer step (with warm-up)."""

    def __init__(self, model: nn.Module, decay: float) -> None:
        self.decay = decay
        # a deep copy of `model`, made before torch.compile (assemble): no compiled forward
        self.averaged = AveragedModel(model, multi_avg_fn=self._average, use_buffers=True)
        self.averaged.requires_grad_(False)

    @property
    def model(self) -> nn.Module:
        """The averaged weights as a model of the trained one's kind (what is evaluated)."""
        return self.averaged.module

    def _average(
        self, averaged: list[torch.Tensor], current: list[torch.Tensor], updates: torch.Tensor
    ) -> None:
        n = int(updates)
        decay = min(self.decay, (1 + n) / (10 + n))
        if averaged[0].is_floating_point():
            torch._foreach_lerp_(averaged, current, 1 - decay)
        else:  # integer buffers (BatchNorm's num_batches_tracked): the latest count
            for mean, value in zip(averaged, current, strict=True):
                mean.copy_(value)

    @torch.no_grad()
    def update(self, model: nn.Module) -> None:
        """Move the average toward `model`'s current weights (the bare model)."""
        self.averaged.update_parameters(model)

    def state_dict(self) -> dict[str, Any]:
        """What a checkpoint keeps: the averaged weights and the number of updates."""
        return {"weights": self.model.state_dict(), "updates": int(self.averaged.n_averaged)}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore what `state_dict()` returned."""
        self.model.load_state_dict(state["weights"])
        self.averaged.n_averaged.fill_(state["updates"])
