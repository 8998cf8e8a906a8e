"""Early stopping (trainer.early_stopping.patience): the epochs since the monitored metric was
last at its best, read off the run's history, which a checkpoint keeps (so it is resume-safe)."""

from __future__ import annotations


def epochs_since_best(history: list[dict[str, float]], monitor: str, mode: str) -> tuple[int, int]:
    """(epochs since the best value of `monitor`, the epoch of that best, 1 for the first):
    the first epoch that reached the best counts, as best.pt is only replaced by a better
    value (`mode` max or min)."""
    values = [epoch[monitor] for epoch in history]
    best = values.index(max(values) if mode == "max" else min(values))
    return len(values) - 1 - best, best + 1
