"""Early stopping (trainer.early_stopping.patience): the epochs since the monitored metric was
last at its best, read off the run's history, which a checkpoint keeps (so it is resume-safe)."""

from __future__ import annotations

import logging

log = logging.getLogger(__name__)


def epochs_since_best(history: list[dict[str, float]], monitor: str, mode: str) -> tuple[int, int]:
    """(epochs since the best value of `monitor`, the epoch of that best, 1 for the first):
    the first epoch that reached the best counts, as best.pt is only replaced by a better
    value (`mode` max or min)."""
    values = [epoch[monitor] for epoch in history]
    best = values.index(max(values) if mode == "max" else min(values))
    return len(values) - 1 - best, best + 1


class EarlyStopping:
    """Stops a training once `monitor` (trainer.checkpoint.monitor, better by `mode`) has not
    improved for `patience` epochs (0: never); the last of `max_epochs` ends it anyway."""

    def __init__(self, patience: int, monitor: str, mode: str, max_epochs: int) -> None:
        self.patience, self.monitor, self.mode = patience, monitor, mode
        self.max_epochs = max_epochs

    def fires(self, history: list[dict[str, float]]) -> bool:
        """Whether to stop after the last epoch of `history` (every epoch so far, resumed
        ones included); logged when it fires."""
        epoch = len(history)
        if not self.patience or not history or epoch >= self.max_epochs:
            return False
        stale, best = epochs_since_best(history, self.monitor, self.mode)
        if stale < self.patience:
            return False
        log.info(
            "early stopping after epoch %d: %s has not improved for %d epochs "
            "(trainer.early_stopping.patience=%d; best %.4g at epoch %d, kept in best.pt)",
            epoch,
            self.monitor,
            stale,
            self.patience,
            history[best - 1][self.monitor],
            best,
        )
        return True
