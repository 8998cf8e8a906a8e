"""The main process's half of the pipeline's stage timings (trainer.pipeline_timing; the stages
and their names: engine/measure/stages.py). For every train batch it keeps the stage times
its worker sent, the wait for it, its copy to the device (`h2d`) and its step; it gives the
means since the last logged step (TensorBoard's pipeline/<stage>_ms), the epoch's (metrics,
the epoch line, the limiting stage) and one row per batch (pipeline.csv, the report's picture).

On CUDA the copy and the step are timed by CUDA events on their streams, read once they have
completed (no synchronisation per batch); elsewhere by the clock around the calls.
"""

from __future__ import annotations

import csv
import time
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from engine.measure.stages import (
    MAIN_STAGES,
    SUMS,
    WORKER_STAGES,
    StageTimes,
    split_times,
    stage_key,
)

CSV_NAME = "pipeline.csv"  # in the run dir: one row per train batch
CSV_COLUMNS = (
    "epoch",
    "step",  # the optimizer step the batch counts toward (a resume drops the rows past it)
    "batch",
    "worker",  # the loader worker that built the batch; -1: the main process
    "samples",
    *(f"{stage}_ms" for stage in WORKER_STAGES),  # summed over the batch's samples
    *(f"{stage}_ms" for stage in MAIN_STAGES),
    "built_from",  # unix seconds: the worker's first and last moment on the batch
    "built_to",
    "asked",  # unix seconds: the main process asked the loader for the batch ...
    "arrived",  # ... and got it
    "step_from",  # unix seconds: the step on the batch (CPU side)
    "step_to",
)
CSV_NUMBERS = (1, 0, 2)  # the whole-number columns: step (what a resume keeps rows before) first


class _Span:
    """One timed span: CUDA events on `device`'s current stream, else the clock."""

    __slots__ = ("end", "seconds", "start")

    def __init__(self, device: torch.device) -> None:
        self.seconds: float | None = None
        if device.type == "cuda":
            self.start, self.end = (
                torch.cuda.Event(enable_timing=True),
                torch.cuda.Event(enable_timing=True),
            )
            self.start.record()
        else:
            self.start, self.end = time.perf_counter(), None

    def close(self) -> None:
        if isinstance(self.start, float):
            self.seconds = time.perf_counter() - self.start
        else:
            self.end.record()

    def resolved(self) -> float | None:
        """Its seconds, once known (a CUDA span: once its events completed)."""
        if self.seconds is None and self.end is not None and self.end.query():
            self.seconds = self.start.elapsed_time(self.end) / 1000.0
        return self.seconds


@dataclass
class BatchTimes:
    """What one train batch cost, in the workers and the main process."""

    index: int
    asked: float  # perf_counter
    arrived: float
    worker: StageTimes | None  # None: the batch came without them (a collate_fn's own type)
    h2d: _Span | None = None
    step: _Span | None = None
    stepped: tuple[float, float] = (0.0, 0.0)  # perf_counter around the step
    optimizer_step: int | None = None  # the optimizer step it counts toward, when known

    def device_seconds(self) -> dict[str, float] | None:
        """h2d and step in seconds; None while the step (or a CUDA span) is still running.
        A batch stepped on without a copy (a benchmark's compute=none) copied for 0 s."""
        step = self.step.resolved() if self.step is not None else None
        h2d = self.h2d.resolved() if self.h2d is not None else 0.0
        if h2d is None or step is None:
            return None
        return {"h2d": h2d, "step": step}


@dataclass
class StageMeans:
    """Sums over a span of batches, for the means: worker stages per sample, main stages
    per batch (each over the batches it is known for), the transform's steps per sample."""

    worker: dict[str, float] = field(default_factory=lambda: dict.fromkeys(WORKER_STAGES, 0.0))
    samples: int = 0
    main: dict[str, float] = field(default_factory=lambda: dict.fromkeys(MAIN_STAGES, 0.0))
    counts: dict[str, int] = field(default_factory=lambda: dict.fromkeys(MAIN_STAGES, 0))
    steps: dict[str, float] = field(default_factory=dict)
    worker_batches: int = 0  # batches that came with their worker stages

    def arrived(self, batch: BatchTimes) -> None:
        """What is known as a batch arrives: its worker stages and the wait for it."""
        if batch.worker is not None:
            self.worker_batches += 1
            self.samples += batch.worker.samples
            for stage in WORKER_STAGES:
                self.worker[stage] += batch.worker.seconds[stage]
            for name, seconds in batch.worker.steps.items():
                self.steps[name] = self.steps.get(name, 0.0) + seconds
        self.add("wait", batch.arrived - batch.asked)

    def add(self, stage: str, seconds: float) -> None:
        """One batch's main-process `stage`."""
        self.main[stage] += seconds
        self.counts[stage] += 1

    def metrics(self) -> dict[str, float]:
        """pipeline/<stage>_ms: worker stages in ms per sample, main stages in ms per batch
        (a stage not yet known for any batch of the span is left out)."""
        out = {}
        if self.samples:
            out |= {stage_key(s): 1000 * v / self.samples for s, v in self.worker.items()}
        out |= {
            stage_key(s): 1000 * v / self.counts[s] for s, v in self.main.items() if self.counts[s]
        }
        return out

    def transform_steps(self) -> dict[str, float]:
        """Each transform step's ms per sample, slowest first."""
        per = {name: 1000 * s / max(1, self.samples) for name, s in self.steps.items()}
        return dict(sorted(per.items(), key=lambda item: -item[1]))


class PipelineTimes:
    """The stage times of one pass over the train loader, batch by batch, on `device`. It
    holds only the batches whose copy or step is not known yet and the rows not yet taken
    (`rows()`), so an epoch of a million batches costs no more memory than one of ten."""

    def __init__(self, device: torch.device) -> None:
        self.device = device
        self.arrived: deque[BatchTimes] = deque()  # arrived, not handed to a step yet
        self.stepped: deque[BatchTimes] = deque()  # handed to a step, copy or step unknown
        self._rows: list[BatchTimes] = []  # known, not yet taken for pipeline.csv
        self._pending = StageMeans()  # what became known since the last logged point
        self._epoch = StageMeans()
        # the batch being stepped on: its times, span, start, index and optimizer step
        self._open: tuple[BatchTimes | None, _Span, float, int, int | None] | None = None
        self.uint8 = False  # the inputs came as uint8 (the copy's normalisation is all there is)
        # perf_counter -> unix seconds, for pipeline.csv's time line across restarts
        self._to_unix = time.time() - time.perf_counter()

    def arrivals(self, batches: Iterator[Any]) -> Iterator[Any]:
        """`batches` without their stage times, each one's wait and times kept. With
        loader.num_workers=0 this process builds the batches: its own stages are timed."""
        SUMS.reset()
        SUMS.enabled = True
        it = iter(batches)
        try:
            while True:
                asked = time.perf_counter()
                try:
                    batch = next(it)
                except StopIteration:
                    return
                batch, worker = split_times(batch)
                times = BatchTimes(-1, asked, time.perf_counter(), worker)
                self.arrived.append(times)
                self._pending.arrived(times)
                self._epoch.arrived(times)
                yield batch
        finally:
            SUMS.enabled = False
            getattr(it, "close", lambda: None)()  # a generator over a loader: workers stop

    def mover(self, move: Callable[[Any], Any]) -> Callable[[Any], Any]:
        """`move`, each call timed as the h2d of the latest batch to arrive (the lookahead
        moves a batch as soon as it arrives, in order)."""

        def timed(batch: Any) -> Any:
            span = _Span(self.device)
            moved = move(batch)
            span.close()
            if self.arrived:
                self.arrived[-1].h2d = span
            self.uint8 = isinstance(batch[0], torch.Tensor) and batch[0].dtype == torch.uint8
            return moved

        return timed

    def stepping(self, batches: Iterator[Any], first: int) -> Iterator[Any]:
        """`batches` (the pass's device batches, numbered from `first`), the time from handing
        each out (or `step_began()`) to `step_ended()` (or being asked for the next) counted
        as its step."""
        self.arrived.clear()  # a benchmark window's lookahead, never stepped on: left out
        for i, batch in enumerate(batches):
            times = self.arrived.popleft() if self.arrived else None
            self._open = (times, _Span(self.device), time.perf_counter(), first + i, None)
            try:
                yield batch
            finally:  # also when the consumer stops here: its step ended
                self.step_ended()

    def step_began(self, step: int) -> None:
        """The step on the batch handed out last begins now, toward optimizer step `step`
        (the loop's own work before it, such as the first batch's picture, is not the step's)."""
        if self._open is not None:
            times, _, _, index, _ = self._open
            self._open = (times, _Span(self.device), time.perf_counter(), index, step)

    def step_ended(self) -> None:
        """The step on the batch handed out last is done (the loop's optimizer step: what
        follows, logging and checkpoints, is not the step's); later calls change nothing."""
        if self._open is None:
            return
        times, span, began, index, step = self._open
        span.close()
        self._open = None
        if times is not None:
            times.index, times.step, times.optimizer_step = index, span, step
            times.stepped = (began, time.perf_counter())
            self.stepped.append(times)

    def _resolve(self) -> None:
        """Add the copies and steps now known, in order (a CUDA span once it completed)."""
        while self.stepped:
            known = self.stepped[0].device_seconds()
            if known is None:
                return
            for stage, seconds in known.items():
                self._pending.add(stage, seconds)
                self._epoch.add(stage, seconds)
            self._rows.append(self.stepped.popleft())

    def take(self) -> StageMeans:
        """The batches since the last take (TensorBoard's points, a benchmark's window)."""
        self._resolve()
        means, self._pending = self._pending, StageMeans()
        return means

    def epoch(self) -> StageMeans:
        """The whole pass; call after it (and, on CUDA, a synchronize)."""
        self._resolve()
        return self._epoch

    def rows(self, epoch: int) -> list[dict[str, Any]]:
        """pipeline.csv's rows of the batches known since the last call."""
        self._resolve()
        unix, done, self._rows = self._to_unix, self._rows, []
        out = []
        for batch in done:
            main = {"wait": batch.arrived - batch.asked} | (batch.device_seconds() or {})
            worker = batch.worker
            seconds = worker.seconds if worker is not None else {}
            row: dict[str, Any] = {
                "epoch": epoch,
                "step": batch.optimizer_step if batch.optimizer_step is not None else "",
                "batch": batch.index,
                "worker": worker.worker if worker is not None else "",
                "samples": worker.samples if worker is not None else "",
            }
            row |= {
                f"{s}_ms": round(1000 * seconds[s], 4) if seconds else "" for s in WORKER_STAGES
            }
            row |= {f"{s}_ms": round(1000 * main[s], 4) for s in MAIN_STAGES}
            row |= {
                "built_from": round(worker.began + unix, 6) if worker is not None else "",
                "built_to": round(worker.ended + unix, 6) if worker is not None else "",
                "asked": round(batch.asked + unix, 6),
                "arrived": round(batch.arrived + unix, 6),
                "step_from": round(batch.stepped[0] + unix, 6),
                "step_to": round(batch.stepped[1] + unix, 6),
            }
            out.append(row)
        return out


def append_rows(path: Path, rows: list[dict[str, Any]]) -> None:
    """Append `rows` to pipeline.csv at `path` (its header first when it is new)."""
    new = not path.is_file() or path.stat().st_size == 0
    with open(path, "a", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, fieldnames=CSV_COLUMNS)
        if new:
            writer.writeheader()
        writer.writerows(rows)  # numbers only: no cell a spreadsheet could run


def stage_table(stages: dict[str, float], steps: dict[str, float], workers: int) -> str:
    """pipeline/<stage>_ms `stages` as an aligned text table: ms per sample where the batches
    were built (the workers, or the main process with `workers` 0), per batch in the main
    process, and the transform's `steps`, slowest first (for the log and TensorBoard)."""
    built = "workers" if workers else "main"
    lines = [f"{'stage':<10} {'ms':>9}  per     in"]
    for stage in (*WORKER_STAGES, *MAIN_STAGES):
        key = stage_key(stage)
        if key in stages:
            per, where = ("sample", built) if stage in WORKER_STAGES else ("batch", "main")
            lines.append(f"{stage:<10} {stages[key]:>9.3f}  {per:<7} {where}")
    lines += [f"  {name:<24} {ms:>9.3f}  sample  transform step" for name, ms in steps.items()]
    return "\n".join(lines)
