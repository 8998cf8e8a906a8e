"""CSV files of the run dir with a step column (metrics.csv, samples.csv), kept as one table
across resumes: TensorBoard's purge_step, for CSV. The rows of the interrupted run's tail (at
or past the resumed step) are dropped, and a training resumed into a new run dir starts with
the earlier run dir's rows before that step."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from engine.core.io import atomic_writer


def _complete_lines(path: Path) -> Iterator[str]:
    """The lines of `path` after its header, streamed; a last line cut short by a kill is left
    out. Names that are not UTF-8 (written with surrogateescape) come back byte for byte."""
    with path.open(encoding="utf-8", errors="surrogateescape", newline="") as f:
        next(f, None)
        for line in f:
            if line.endswith("\n"):
                yield line


def start_with_rows_before(
    path: Path, sources: list[Path], header: list[str], step: int, column: int
) -> None:
    """Rewrite `path` as `header` plus, in order, the rows of each existing file of `sources`
    (which may include `path`) whose `column` holds a step below `step` (the columns up to it
    are numbers, never quoted). Streamed, so a large table costs no memory; atomic."""
    with atomic_writer(path) as out:
        out.write((",".join(header) + "\n").encode())
        for source in sources:
            if not source.is_file():
                continue
            for line in _complete_lines(source):
                if int(line.split(",", column + 1)[column]) < step:
                    out.write(line.encode("utf-8", "surrogateescape"))
