"""`make pipeline-report RUN=<run dir>` (default: outputs/latest_train): one PNG of a training's
input pipeline over time, drawn from the run's own pipeline.csv (trainer.pipeline_timing).

One strip per loader worker and one for the main process, time on the x-axis: each batch a
worker built is a bar from its first to its last moment on it, split in proportion to its
read, decode, transform and collate; the main process shows, at the moments they happened,
its wait for each batch, the copy to the device that follows its arrival, and its step. Idle workers are gaps in their strip, a slow first
epoch is a long first wait, a stalled queue is wait bars while the workers' strips are busy.

    python -m engine.modes.pipeline_report outputs/latest_train   # writes <run>/pipeline.png
"""

from __future__ import annotations

import os
import statistics
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Annotated, Any, TypedDict

from engine.core.bounds import DAY, Bound, Finite
from engine.core.records import RecordError, read_table
from engine.measure.stages import COLOURS
from engine.metric_keys import WORKER_STAGES
from engine.training.pipeline_timing import CSV_NAME

PNG_NAME = "pipeline.png"  # in the run dir
MAIN = "main"


@dataclass(frozen=True)
class Span:
    """One bar of the picture: `stage` on strip `lane` from `start` to `start + width` (s)."""

    lane: str
    stage: str
    start: float
    width: float


MAX_LANES = 256  # strips a picture holds: loader workers of one run, and the main process
MAX_BYTES = 2**31  # a pipeline.csv of ~10 million batches
MAX_SPAN = 366 * DAY  # seconds a row's moments may lie from the file's median moment
FIX = (
    "the file is not as a training wrote it: train again (trainer.pipeline_timing=true) to "
    "write it anew."
)
Ms = Annotated[float, Bound(0, 1000 * DAY)] | None  # a stage's milliseconds (empty: untimed)
Moment = Finite  # unix seconds
MOMENTS = ("built_from", "built_to", "asked", "arrived", "step_from", "step_to")


class _Main(TypedDict):
    asked: Moment
    arrived: Moment
    h2d_ms: Ms
    step_from: Moment
    step_to: Moment


class PipelineRow(_Main, total=False):
    """A pipeline.csv row (engine/training/pipeline_timing.py): the main process's moments
    always; the worker's where it was timed (its stage columns are WORKER_STAGES')."""

    epoch: int | None
    step: int | None
    batch: int | None
    worker: Annotated[int, Bound(-1, MAX_LANES - 1)] | None  # -1: the main process
    samples: int | None
    built_from: Moment | None
    built_to: Moment | None
    read_ms: Ms
    decode_ms: Ms
    transform_ms: Ms
    collate_ms: Ms
    wait_ms: Ms
    step_ms: Ms


def _spans_of(row: dict[str, Any]) -> Iterator[tuple[str, str, float, float]]:
    """(lane, stage, start, width) of each bar of one pipeline.csv row, unix seconds."""
    if row.get("built_from") is not None:  # the batch came with its worker's times
        began, built = row["built_from"], row["built_to"] - row["built_from"]
        costs = [row.get(f"{s}_ms") or 0.0 for s in WORKER_STAGES]
        total = sum(costs)
        worker = row.get("worker")
        lane = MAIN if worker is None or worker < 0 else f"worker {worker}"
        for stage, cost in zip(WORKER_STAGES, costs, strict=True):
            if total > 0:
                yield lane, stage, began, built * cost / total
                began += built * cost / total
    yield MAIN, "wait", row["asked"], row["arrived"] - row["asked"]
    yield MAIN, "h2d", row["arrived"], (row["h2d_ms"] or 0.0) / 1000
    yield MAIN, "step", row["step_from"], row["step_to"] - row["step_from"]


def _utc(moment: float) -> str:
    """` (2026-12-06 13:04:05 UTC)`, or "" for a moment no calendar date holds."""
    try:
        return f" ({datetime.fromtimestamp(moment, timezone.utc):%Y-%m-%d %H:%M:%S} UTC)"
    except (ValueError, OverflowError, OSError):
        return ""


def _order_problem(row: dict[str, Any]) -> str | None:
    """Why `row`'s bars cannot be (None: they can): a worker's build with one end only, or a
    bar ending before it starts."""
    if (row.get("built_from") is None) != (row.get("built_to") is None):
        return "it has one of built_from and built_to, where a timed batch has both"
    for start, end in (("built_from", "built_to"), ("asked", "arrived"), ("step_from", "step_to")):
        if row.get(start) is not None and row.get(end) is not None and row[end] < row[start]:
            return f"its {end} ({row[end]}) is before its {start} ({row[start]})"
    return None


def read_spans(path: Path) -> list[Span]:
    """The bars of pipeline.csv at `path`, times in seconds from its first moment; a file
    that is not as a training wrote it is one ValueError line naming it (and the line). A
    moment more than a year from the file's median moment is refused: no run's rows span
    that, and a row dated 1970 once stretched the picture over 56 years."""
    rows = []
    for line, row in read_table(path, PipelineRow, MAX_BYTES, "a pipeline.csv", FIX):
        why = _order_problem(row)
        if why is not None:
            raise RecordError(f"{path} line {line}: {why}: {FIX}")
        rows.append((line, row))
    if not rows:
        raise ValueError(f"{path} holds no batches: a training writes one row per train batch.")
    middle = statistics.median(row["asked"] for _, row in rows)
    for line, row in rows:
        moments = {k: row[k] for k in MOMENTS if row.get(k) is not None}  # 0.0 is a moment
        key = next((k for k, moment in moments.items() if abs(moment - middle) > MAX_SPAN), None)
        if key is not None:
            raise RecordError(
                f"{path} line {line}: its {key} is {row[key]}{_utc(row[key])}, more than a year "
                f"from the file's other rows (their median moment {middle}{_utc(middle)}): {FIX}"
            )
    spans = [span for _, row in rows for span in _spans_of(row)]
    origin = min(start for _, _, start, _ in spans)
    return [Span(lane, stage, start - origin, width) for lane, stage, start, width in spans]


def draw(spans: list[Span], out: Path, title: str) -> None:
    """The strips of `spans` into the PNG `out` (Agg, no window; matplotlib imported here:
    only a report draws)."""
    from matplotlib.figure import Figure
    from matplotlib.patches import Patch

    lanes = sorted({s.lane for s in spans}, key=lambda lane: (lane == MAIN, lane))
    figure = Figure(figsize=(12, 1.2 + 0.6 * len(lanes)), dpi=100, layout="constrained")
    ax = figure.subplots()
    for row, lane in enumerate(lanes):
        for stage, colour in COLOURS.items():
            bars = [(s.start, s.width) for s in spans if s.lane == lane and s.stage == stage]
            if bars:
                ax.broken_barh(bars, (row - 0.4, 0.8), facecolors=colour)
    ax.set_yticks(range(len(lanes)), lanes)
    ax.set_xlabel("seconds since the first batch was started")
    ax.set_title(title)
    shown = {s.stage for s in spans}
    handles = [Patch(color=c, label=stage) for stage, c in COLOURS.items() if stage in shown]
    ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize="small")
    ax.grid(axis="x", alpha=0.3)
    figure.savefig(out)


def report(run: Path) -> Path:
    """Draw `run`'s pipeline.csv into `run`/pipeline.png; returns its path."""
    path = run / CSV_NAME
    if not os.path.lexists(path):  # a FIFO or a folder there is named by read_spans
        raise FileNotFoundError(
            f"{path}: no such file; RUN must name a training's run dir trained with "
            "trainer.pipeline_timing=true (the default), e.g. RUN=outputs/latest_train."
        )
    out = run / PNG_NAME
    draw(read_spans(path), out, f"input pipeline over time: {run.resolve().name}")
    return out


def main(argv: list[str]) -> int:
    """`python -m engine.modes.pipeline_report [RUN]`: prints the PNG's path."""
    if len(argv) > 1:
        print("usage: python -m engine.modes.pipeline_report [RUN dir]", file=sys.stderr)
        return 2
    try:
        print(report(Path(argv[0] if argv else "outputs/latest_train")))
    except (OSError, ValueError) as err:
        print(f"pipeline report: {err}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
