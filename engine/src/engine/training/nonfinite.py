"""NaN/inf losses: skip the step within `trainer.max_nonfinite_steps`, else stop naming where."""

from __future__ import annotations

import logging

import torch

from engine.training.distributed import any_rank

log = logging.getLogger(__name__)


class NonFiniteGuard:
    """Counts non-finite train losses; every DDP rank skips together (their gradient
    all-reduces would fall out of step otherwise), so ranks agree first when in lockstep."""

    def __init__(self, budget: int, optimizer: torch.optim.Optimizer) -> None:
        self.budget, self.optimizer = budget, optimizer
        self.count = 0

    def allows(self, loss: torch.Tensor, where: str, lockstep: bool) -> bool:
        """True for a finite loss (on every rank); else the step's gradients are dropped and
        the loss skipped, or, past the budget, a FloatingPointError naming `where`."""
        nonfinite = not bool(torch.isfinite(loss))
        if lockstep:  # (under DDP's Join, extra collectives would not be matched)
            (nonfinite,) = any_rank([nonfinite], loss.device)
        if not nonfinite:
            return True
        self.count += 1
        self.optimizer.zero_grad(set_to_none=True)
        value = f"is {loss.item()}" if not torch.isfinite(loss) else "is not finite on another rank"
        where = f"train loss {value} at {where}"
        if self.count > self.budget:
            raise FloatingPointError(
                f"{where}: stopping ({self.count} non-finite losses, "
                f"trainer.max_nonfinite_steps={self.budget}). Lower optimizer.lr, look at the "
                "inputs with mode=inspect, try trainer.precision=32, or allow N skipped steps "
                "with trainer.max_nonfinite_steps=N."
            )
        log.warning("%s: step skipped (%d of %d allowed)", where, self.count, self.budget)
        return False
