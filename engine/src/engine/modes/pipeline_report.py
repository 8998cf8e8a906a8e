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

import csv
import math
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

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


def _float(row: dict[str, str], key: str, path: Path, line: int) -> float:
    """The finite number in column `key`, or one ValueError line naming file, line, column."""
    try:
        value = float(row[key])
    except (KeyError, TypeError, ValueError):
        value = None
    if value is None or not math.isfinite(value):
        raise ValueError(
            f"{path} line {line}: column {key!r} is {row.get(key)!r}, not a finite number; the "
            "file is not as a training wrote it: train again (trainer.pipeline_timing=true) to "
            "write it anew."
        )
    return value


def _lane(row: dict[str, str], path: Path, line: int) -> str:
    worker = _float(row, "worker", path, line)
    if worker != int(worker) or not -1 <= worker < MAX_LANES:
        raise ValueError(
            f"{path} line {line}: column 'worker' is {row['worker']!r}, not a loader worker "
            f"(-1 for the main process, 0 to {MAX_LANES - 1}); the file is not as a training "
            "wrote it: train again to write it anew."
        )
    return f"worker {int(worker)}" if worker >= 0 else MAIN


def _rows(reader: csv.DictReader, path: Path) -> Iterator[tuple[int, dict[str, str]]]:
    """(line, row) of `reader`; a record csv cannot read is one ValueError line naming it."""
    while True:
        try:
            row = next(reader)
        except StopIteration:
            return
        except csv.Error as err:
            raise ValueError(
                f"{path} line {reader.line_num + 1}: not CSV as a training writes it ({err}); train "
                "again to write it anew."
            ) from None
        yield reader.line_num, row


def _spans(path: Path) -> Iterator[tuple[str, str, float, float]]:
    """(lane, stage, start, width) of each bar of pipeline.csv, unix seconds."""
    with open(path, newline="", encoding="utf-8") as f:
        for line, row in _rows(csv.DictReader(f), path):
            if row.get("built_from"):  # the batch came with its worker's times
                began = _float(row, "built_from", path, line)
                built = _float(row, "built_to", path, line) - began
                costs = [_float(row, f"{s}_ms", path, line) for s in WORKER_STAGES]
                total = sum(costs)
                lane = _lane(row, path, line)
                for stage, cost in zip(WORKER_STAGES, costs, strict=True):
                    if total > 0:
                        yield lane, stage, began, built * cost / total
                        began += built * cost / total
            asked = _float(row, "asked", path, line)
            arrived = _float(row, "arrived", path, line)
            yield MAIN, "wait", asked, arrived - asked
            h2d = _float(row, "h2d_ms", path, line) / 1000
            yield MAIN, "h2d", arrived, h2d
            step_from = _float(row, "step_from", path, line)
            yield MAIN, "step", step_from, _float(row, "step_to", path, line) - step_from


def read_spans(path: Path) -> list[Span]:
    """The bars of pipeline.csv at `path`, times in seconds from its first moment; a file
    that is not as a training wrote it is one ValueError line naming it (and the line)."""
    try:
        spans = list(_spans(path))
    except UnicodeDecodeError as err:
        raise ValueError(
            f"{path}: byte {err.start} is not UTF-8; the file is not as a training wrote it: "
            "train again to write it anew."
        ) from None
    if not spans:
        raise ValueError(f"{path} holds no batches: a training writes one row per train batch.")
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
    if not path.is_file():
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
