"""logger=csv: metrics.csv in the run dir, one row per point: `step,key,value` (a long table:
the per-step and the per-epoch keys arrive at different steps, and a key may appear later).

A resumed training keeps one table, as TensorBoard's purge keeps one board
(engine/runs/step_rows.py).
"""

from __future__ import annotations

from pathlib import Path

from engine.core.csv_cells import escape_cell
from engine.runs.loggers.base import Logger, RunContext
from engine.runs.step_rows import RowWriter, start_with_rows_before

FILE = "metrics.csv"
COLUMNS = ["step", "key", "value"]


class CsvLogger(Logger):
    """`<run dir>/metrics.csv`, appended to at every point and flushed before checkpoints."""

    def __init__(self, run: RunContext) -> None:
        self.path, self.start = run.out / FILE, run.start_step
        self._start_with([self.path])

    def _start_with(self, sources: list[Path]) -> None:
        """Rewrite the file as the rows of `sources` before the start step, then append."""
        start_with_rows_before(self.path, sources, COLUMNS, self.start, numbers=(0,))
        self.file = self.path.open("a", encoding="utf-8", newline="")
        self.writer = RowWriter(self.file)

    def scalars(self, values: dict[str, float], step: int) -> None:
        for key, value in values.items():
            self.writer.writerow([step, escape_cell(key), float(value)])

    def flush(self) -> None:
        self.file.flush()

    def resumed(self, previous: Path) -> None:
        earlier = previous / FILE
        if earlier.resolve() == self.path.resolve():
            return
        self.file.close()
        self._start_with([earlier, self.path])

    def close(self) -> None:
        self.file.close()
