"""logger=csv: metrics.csv in the run dir, one row per point: `step,key,value` (a long table:
the per-step and the per-epoch keys arrive at different steps, and a key may appear later).

A resumed training keeps one table, as TensorBoard's purge keeps one board: the rows at or
past the resumed step are dropped (the interrupted run's tail), and a training resumed into a
new run dir starts with the earlier run dir's rows before that step.
"""

from __future__ import annotations

import csv
import io
from pathlib import Path

from engine.core.io import atomic_write_bytes
from engine.runs.loggers.base import Logger, RunContext

FILE = "metrics.csv"
COLUMNS = ["step", "key", "value"]


def rows_before(path: Path, step: int) -> list[list[str]]:
    """The rows of the metrics.csv at `path` whose step is below `step` (none without a file);
    a last line cut short by a kill is left out."""
    if not path.is_file():
        return []
    text = path.read_text(encoding="utf-8")
    lines = text.splitlines(keepends=True)
    if lines and not lines[-1].endswith("\n"):
        lines.pop()
    rows = list(csv.reader(lines))[1:]
    return [row for row in rows if int(row[0]) < step]


def _write(path: Path, rows: list[list[str]]) -> None:
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerows([COLUMNS, *rows])
    atomic_write_bytes(path, buffer.getvalue().encode("utf-8"))


class CsvLogger(Logger):
    """`<run dir>/metrics.csv`, appended to at every point and flushed before checkpoints."""

    def __init__(self, run: RunContext) -> None:
        self.path, self.start = run.out / FILE, run.start_step
        self._start_with(rows_before(self.path, self.start))

    def _start_with(self, rows: list[list[str]]) -> None:
        """Rewrite the file as `rows`, then append to it."""
        _write(self.path, rows)
        self.file = self.path.open("a", encoding="utf-8", newline="")
        self.writer = csv.writer(self.file, lineterminator="\n")

    def scalars(self, values: dict[str, float], step: int) -> None:
        self.writer.writerows([step, key, float(value)] for key, value in values.items())

    def flush(self) -> None:
        self.file.flush()

    def resumed(self, previous: Path) -> None:
        earlier = previous / FILE
        if earlier.resolve() == self.path.resolve():
            return
        self.file.close()
        self._start_with(rows_before(earlier, self.start) + rows_before(self.path, self.start))

    def close(self) -> None:
        self.file.close()
