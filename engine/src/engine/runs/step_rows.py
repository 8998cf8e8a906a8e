"""CSV files of the run dir with a step column (metrics.csv, samples.csv), kept as one table
across resumes: TensorBoard's purge_step, for CSV. The rows of the interrupted run's tail (at
or past the resumed step) are dropped, and a training resumed into a new run dir starts with
the earlier run dir's rows before that step.

The files are read back as hostile input: a record may span lines (csv quotes a file name
holding a line break), and a row that is none of the table's (a hand edit) is refused in one
line naming the file, the line and the fix, never copied on or skipped without a word."""

from __future__ import annotations

import csv
import io
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import IO, Any

from engine.core.io import atomic_writer
from engine.core.records import open_regular

MAX_DIGITS = 18  # a step, epoch or index below 10**18; never near int()'s 4,300-digit limit


class RowWriter:
    """csv.writer for a step table (lines end in \n): Python's csv (3.11) leaves a text cell
    holding a lone \r unquoted, and a reader splits the row there, so such a row is written
    with its text cells quoted (its numbers never are)."""

    def __init__(self, file: IO[str]) -> None:
        self.plain = csv.writer(file, lineterminator="\n")
        self.quoted = csv.writer(file, lineterminator="\n", quoting=csv.QUOTE_NONNUMERIC)

    def writerow(self, row: Sequence[Any]) -> None:
        """`row` as one record, read back cell for cell."""
        breaks = any(isinstance(cell, str) and "\r" in cell for cell in row)
        (self.quoted if breaks else self.plain).writerow(row)


def _records(path: Path) -> Iterator[tuple[int, str]]:
    """(its first line's number, its text) of each CSV record of `path` after the header,
    streamed. A record ends at a line end outside quotes; a last line cut short by a kill is
    left out. Names that are not UTF-8 (written with surrogateescape) come back byte for byte."""
    try:
        raw = open_regular(path, "a table a run wrote")
    except ValueError as err:  # a FIFO would hang the resume
        raise ValueError(
            f"{path}: {err}; delete it (losing its rows), then resume again."
        ) from None
    with io.TextIOWrapper(raw, encoding="utf-8", errors="surrogateescape", newline="") as f:
        next(f, None)
        record, start, line = "", 2, 2
        for piece in f:  # split at \n, \r and \r\n alike (newline="")
            if not record:
                start = line
            record += piece
            line += piece.endswith("\n")
            if piece.endswith("\n") and record.count('"') % 2 == 0:
                yield start, record
                record = ""
        if "\n" in record:  # complete lines inside an open quote: no kill writes that
            yield start, record


def _cells(record: str) -> list[str] | str:
    """The cells of one CSV record, or why it is none: strict, so a quote out of place (a
    stray one, a cut) is refused rather than guessed at."""
    try:
        rows = list(csv.reader(io.StringIO(record, newline=""), strict=True))
    except csv.Error as err:
        return f"not CSV: {err}"
    return rows[0] if len(rows) == 1 else "a line break outside quotes"


def _whole(cell: str) -> bool:
    """Whether `cell` is a whole number a run writes: ASCII digits, at most MAX_DIGITS."""
    return 0 < len(cell) <= MAX_DIGITS and cell.isascii() and cell.isdigit()


def _step(record: str, path: Path, line: int, header: list[str], numbers: tuple[int, ...]) -> int:
    """The step of `record` (its first `numbers` column), or one ValueError line naming the
    file, the line and the fix when it is no row of `header` with ints in `numbers`."""
    cells = _cells(record)
    if isinstance(cells, str):
        why = cells
    elif len(cells) != len(header):
        why = f"{len(cells)} cells, not the {len(header)} of {','.join(header)}"
    else:
        bad = [header[i] for i in numbers if not _whole(cells[i])]
        if not bad:
            return int(cells[numbers[0]])
        why = f"its {', '.join(bad)} not a whole number of at most {MAX_DIGITS} digits"
    shown = record if len(record) <= 60 else record[:57] + "..."
    raise ValueError(
        f"{path}, line {line}: {shown.rstrip()!r} is no row of this table ({why}); the run "
        "wrote this file and reads it back to resume: put the line back as it was, or delete "
        "it (or the whole file, losing its rows), then resume again."
    )


def start_with_rows_before(
    path: Path, sources: list[Path], header: list[str], step: int, numbers: tuple[int, ...]
) -> None:
    """Rewrite `path` as `header` plus, in order, the rows of each existing file of `sources`
    (which may include `path`) whose step (the first of the whole-number columns `numbers`)
    is below `step`. Streamed, so a large table costs no memory; atomic."""
    with atomic_writer(path) as out:
        out.write((",".join(header) + "\n").encode())
        for source in sources:
            if not source.exists():  # a FIFO or a folder is named (open_regular), not skipped
                continue
            for line, record in _records(source):
                if _step(record, source, line, header, numbers) < step:
                    out.write(record.encode("utf-8", "surrogateescape"))
