"""`trainer.clip_grad_norm`: the gradients' total L2 norm clipped before every optimizer step,
by a step pre-hook on the optimizer, so every step clips, the template's or one of your own.

The hook sees the gradients as the optimizer will use them: under `precision=16-mixed`,
`GradScaler.step` unscales them before it calls the optimizer (and skips the step, hook and
all, when they hold inf/NaN), as torch's AMP recipe clips after `scaler.unscale_`. A fused
optimizer unscales inside its own step instead (it is passed `grad_scale`): the norm is then
compared at that scale. Frozen weights (trainer.freeze_epochs) have no gradient and count for
nothing.
"""

from __future__ import annotations

from typing import Any

import torch
from torch.utils.hooks import RemovableHandle


def clip_before_each_step(optimizer: torch.optim.Optimizer, max_norm: float) -> RemovableHandle:
    """Clip the total norm of `optimizer`'s gradients to `max_norm` before each of its steps."""

    def clip(opt: torch.optim.Optimizer, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        grads = [p for group in opt.param_groups for p in group["params"] if p.grad is not None]
        scale = kwargs.get("grad_scale")  # a fused optimizer under GradScaler: still scaled
        torch.nn.utils.clip_grad_norm_(grads, max_norm * (1.0 if scale is None else float(scale)))

    return optimizer.register_step_pre_hook(clip)
