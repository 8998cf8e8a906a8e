"""history.csv: one row per epoch with every metric of that epoch, rewritten after each epoch
(a resumed run rewrites it from the history its checkpoint kept, so no row is doubled)."""

from __future__ import annotations

from pathlib import Path

from engine.core.io import write_csv


def write_history(path: Path, history: list[dict[str, float]]) -> None:
    """Write `history` (every epoch's metrics, the first epoch first) as CSV: an `epoch`
    column, then every metric in the order the epochs first reported it."""
    columns = ["epoch", *dict.fromkeys(key for epoch in history for key in epoch)]
    write_csv(path, columns, [{"epoch": n} | epoch for n, epoch in enumerate(history, 1)])
