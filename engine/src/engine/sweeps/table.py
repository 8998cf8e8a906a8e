"""The sweep table: one CSV row per finished job, ranked into Markdown and a plot; with
repeated measurements (`<metric>_min` / `_max` columns), or for an accuracy measured on a
known number of samples (`val/samples`: its binomial sampling error), which jobs the best
cannot be told apart from (`tied`). The csv module rather than pandas: the table is a few hundred rows at
most, appended one row by each job as it ends; pandas would be a run-time dependency (not in
the engine's today) for that alone."""

from __future__ import annotations

import csv
import io
import math
import os
from collections.abc import Sequence
from pathlib import Path

from engine.core.csv_cells import own_rows
from engine.core.io import atomic_write_bytes, csv_text
from engine.core.records import RecordError, regular_file_bytes
from engine.measure.timing import Spread
from engine.metric_keys import lower_is_better

# job_s: wall time incl. set-up; dir: the job's output directory; runs_as: the overrides with
# loader knobs that cannot apply unset (engine/sweeps/reuse.py)
MAX_SUMMARY_BYTES = 2**28  # a summary.csv of ~a million jobs
BASE_COLUMNS = ("job", "status", "job_s", "overrides", "error", "dir", "runs_as")
TIED = "tied"  # yes: the job's range of the ranking metric overlaps the best job's
Z95 = 1.96  # the normal quantile of a two-sided 95% interval


def append_row(path: Path, columns: Sequence[str], row: dict[str, object]) -> None:
    """Append `row` to the CSV at `path` (writing the header first), as one write call; cells
    that would start a spreadsheet formula (an override `+key=...`) are escaped. A file whose
    header differs (a sweep dir an older engine wrote, resumed) is rewritten first with its
    columns followed by the new ones, so no cell lands under another column's name."""
    if path.exists():
        header = next(csv.reader(io.StringIO(_text(path), newline="")), [])
        if header and header != list(columns):
            merged = [*header, *(c for c in columns if c not in header)]
            write_rows(path, merged, read_rows(path))
            columns = merged
    text = csv_text(columns, [row], header=not path.exists())
    with open(path, "a", newline="") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())


def write_rows(path: Path, columns: Sequence[str], rows: list[dict[str, str]]) -> None:
    """Replace the CSV at `path` with `rows` (atomically: a reader sees the old or the new)."""
    atomic_write_bytes(path, csv_text(columns, rows).encode())


def _text(path: Path) -> str:
    """summary.csv's text, read as hostile input: a regular file (a FIFO would hang the
    sweep), at most MAX_SUMMARY_BYTES, UTF-8; else one RecordError naming it and the fix."""
    try:
        return regular_file_bytes(path, MAX_SUMMARY_BYTES, "a sweep's summary.csv").decode()
    except ValueError as err:  # not a regular file, too large, not UTF-8
        raise RecordError(
            f"{path}: {err}: the sweep writes it as its jobs end; move it aside (every job "
            "keeps its metrics.json) and run the sweep again."
        ) from None


def read_rows(path: Path) -> list[dict[str, str]]:
    """All rows of a summary CSV (an absent file has none), unescaped as written."""
    if not path.exists():
        return []
    return list(own_rows(io.StringIO(_text(path), newline="")))


def rank(rows: list[dict[str, str]], metric: str) -> list[dict[str, str]]:
    """Finished jobs best first by `metric`, then failed jobs in job order."""
    ok = [r for r in rows if r["status"] == "ok" and r.get(metric)]
    ok.sort(key=lambda r: float(r[metric]), reverse=not lower_is_better(metric))
    return ok + [r for r in rows if r not in ok]


def is_proportion(metric: str) -> bool:
    """Whether `metric` is a share of samples (val/acc, val/best_acc, val/ema_acc,
    val/subset_acc): its noise is binomial in the number of samples it was measured on."""
    name = metric.rsplit("/", 1)[-1]
    return name == "acc" or name.endswith("_acc")


def samples_key(metric: str) -> str:
    """The metrics.json key counting the samples `metric` was measured on (val/samples)."""
    return f"{metric.split('/', 1)[0]}/samples"


def binomial_spread(share: float, samples: int) -> Spread:
    """`share` with its 95% Wilson interval over `samples` samples: where the same model's
    accuracy would land on another draw of that many (450 samples near 0.9: +-0.028)."""
    z2 = Z95**2
    scale = 1 + z2 / samples
    centre = (share + z2 / (2 * samples)) / scale
    half = Z95 * math.sqrt(share * (1 - share) / samples + z2 / (4 * samples**2)) / scale
    return Spread(share, max(0.0, centre - half), min(1.0, centre + half))


def spread_of(row: dict[str, str], metric: str) -> Spread | None:
    """The row's median [min-max] of `metric` over its repeats, or an accuracy's sampling
    interval (binomial_spread over `val/samples`); None when it has neither."""
    try:
        return Spread(float(row[metric]), float(row[f"{metric}_min"]), float(row[f"{metric}_max"]))
    except (KeyError, ValueError):
        pass
    try:
        samples = int(float(row[samples_key(metric)]))
        share = float(row[metric])
    except (KeyError, ValueError):
        return None
    return binomial_spread(share, samples) if is_proportion(metric) and samples > 0 else None


def mark_tied(ranked: list[dict[str, str]], metric: str) -> list[dict[str, str]]:
    """Set each row's `tied` from `rank`'s order: yes when its range of `metric` overlaps the
    best (first) job's, no when not, empty for rows without a range (failed, not run)."""
    best = spread_of(ranked[0], metric) if ranked and ranked[0]["status"] == "ok" else None
    for row in ranked:
        spread = spread_of(row, metric) if row["status"] == "ok" else None
        tied = best is not None and spread is not None and spread.overlaps(best)
        row[TIED] = "" if best is None or spread is None else "yes" if tied else "no"
    return ranked


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
