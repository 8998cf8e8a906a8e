"""The sweep table: one CSV row per finished job, ranked into Markdown and a plot."""

from __future__ import annotations

import csv
import io
import os
from collections.abc import Sequence
from pathlib import Path

# job_s: wall time incl. set-up; dir: the job's output directory
BASE_COLUMNS = ("job", "status", "job_s", "overrides", "error", "dir")
# Metrics where smaller is better; every other metric ranks largest first.
LOWER_IS_BETTER = {
    "val/loss",
    "train/loss",
    "train/data_wait_frac",
    "train/first_batch_s",
    "wall_s",
    "loader/first_batch_s",
    "loader/data_wait_frac",
    "loader/cpu_ms_per_sample",
    "loader/peak_rss_mb",
    "inspect/warnings",
}


def append_row(path: Path, columns: Sequence[str], row: dict[str, object]) -> None:
    """Append `row` to the CSV at `path` (writing the header first), as one write call."""
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=list(columns), extrasaction="ignore")
    new = not path.exists()
    if new:
        writer.writeheader()
    writer.writerow(row)
    with open(path, "a", newline="") as f:
        f.write(buffer.getvalue())
        f.flush()
        os.fsync(f.fileno())


def read_rows(path: Path) -> list[dict[str, str]]:
    """All rows of a summary CSV (an absent file has none)."""
    if not path.exists():
        return []
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def rank(rows: list[dict[str, str]], metric: str) -> list[dict[str, str]]:
    """Finished jobs best first by `metric`, then failed jobs in job order."""
    ok = [r for r in rows if r["status"] == "ok" and r.get(metric)]
    ok.sort(key=lambda r: float(r[metric]), reverse=metric not in LOWER_IS_BETTER)
    return ok + [r for r in rows if r not in ok]


def to_markdown(rows: list[dict[str, str]], columns: Sequence[str]) -> str:
    """A Markdown table of `columns` (numbers to 4 significant digits)."""

    def cell(value: str) -> str:
        try:
            return f"{float(value):.4g}"
        except ValueError:
            return value.replace("|", "\\|")

    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    lines += ["| " + " | ".join(cell(r.get(c, "")) for c in columns) + " |" for r in rows]
    return "\n".join(lines) + "\n"
