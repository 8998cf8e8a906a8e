"""Learning-rate schedules for the `scheduler` config group (stepped once per optimizer step)."""

from __future__ import annotations

import math

from torch.optim import Optimizer
from torch.optim.lr_scheduler import LambdaLR

from engine.api import Fraction


def warmup_cosine(optimizer: Optimizer, total_steps: int, warmup_frac: Fraction) -> LambdaLR:
    """Linear warm-up over `warmup_frac` of the steps, then cosine decay to zero."""
    warmup = max(1, round(total_steps * warmup_frac))

    def factor(step: int) -> float:
        if step < warmup:
            return (step + 1) / warmup
        progress = min(1.0, (step - warmup) / max(1, total_steps - warmup))
        return 0.5 * (1.0 + math.cos(math.pi * progress))

    return LambdaLR(optimizer, factor)


def constant(optimizer: Optimizer, total_steps: int) -> LambdaLR:
    """The optimizer's learning rate, unchanged."""
    del total_steps  # same signature as every schedule
    return LambdaLR(optimizer, lambda step: 1.0)
