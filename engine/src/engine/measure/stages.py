"""Where a batch's time goes while it is built, stage by stage (trainer.pipeline_timing).

The stage names are a contract (`pipeline/<stage>_ms` in metrics.json and TensorBoard's
`~pipeline/<stage>_ms`, engine/runs/tensorboard.py board_tag; a sweep's
summary columns, pipeline.csv), written once in engine/metric_keys.py:

- in the loader workers (the main process with loader.num_workers=0), per sample: `read` (the
  bytes from storage), `decode` (bytes to a sample: what a fetch spends outside read and
  transform), `transform` (the split's pipeline) and `collate` (stacking the batch);
- in the main process, per batch: `wait` (blocked on the loader), `h2d` (the copy to the
  device and the normalisation there) and `step` (forward, backward, optimizer step).

Each process sums its worker stages for the batch it is building in `SUMS`; the workers'
collate (engine/data/batch_stages.py) takes them and appends one `StageTimes` after the
batch's fields (as the sample ids travel), so the numbers ride the loader's own queue: a few
floats a batch, no queue or shared memory of their own. perf_counter is the system-wide
monotonic clock on Linux, macOS and Windows, so a worker's times and the main process's lie on
one time line (the pipeline report's picture).
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

from torch.utils.data import get_worker_info

from engine.metric_keys import MAIN_STAGES, WORKER_STAGES

STAGES = WORKER_STAGES + MAIN_STAGES
COLOURS = {  # one per stage, the same in every picture (the pipeline report, a sweep's)
    "read": "#4c72b0",
    "decode": "#dd8452",
    "transform": "#55a868",
    "collate": "#c44e52",
    "wait": "#bbbbbb",
    "h2d": "#8172b3",
    "step": "#64b5cd",
}


def stage_key(stage: str) -> str:
    """The metric key of `stage`: `pipeline/<stage>_ms` (engine/metric_keys.py PIPELINE_KEYS)."""
    return f"pipeline/{stage}_ms"


class StageTimes:
    """One batch's worker stages: seconds summed over its `samples` samples, the transform's
    steps by name, the worker that built it (-1: the main process) and when (perf_counter)."""

    __slots__ = ("began", "ended", "samples", "seconds", "steps", "worker")

    def __init__(
        self,
        samples: int,
        seconds: dict[str, float],
        steps: dict[str, float],
        worker: int,
        began: float,
        ended: float,
    ) -> None:
        self.samples, self.seconds, self.steps = samples, seconds, steps
        self.worker, self.began, self.ended = worker, began, ended

    def __reduce__(self) -> tuple[type, tuple[Any, ...]]:  # from a worker to the main process
        args = (self.samples, self.seconds, self.steps, self.worker, self.began, self.ended)
        return (StageTimes, args)


TIMED = ("read", "decode", "transform")  # what a sample's code marks (timed_stage, SUMS.timed)
FETCH = "fetch"  # a whole map-style fetch: its time outside read and transform is the decode


class StageSums:
    """This process's running sums for the batch being built; `take` hands them over. Off
    (`enabled` false: a loader without stage times, a val loader's workers) it times nothing.
    A stage timed inside the same stage (a marked reader calling another) counts once."""

    def __init__(self) -> None:
        self.enabled = False
        self.reset()

    def reset(self) -> None:
        """Start empty (a forked worker inherits its parent's sums)."""
        self.seconds = dict.fromkeys((*TIMED, FETCH), 0.0)
        self.depth = dict.fromkeys((*TIMED, FETCH), 0)
        self.steps: dict[str, float] = {}
        self.began: float | None = None

    @contextmanager
    def timed(self, stage: str) -> Iterator[None]:
        """Add the time spent inside to `stage` (read, decode, transform or fetch)."""
        if not self.enabled or self.depth[stage]:
            yield
            return
        start = time.perf_counter()
        if self.began is None:
            self.began = start
        self.depth[stage] += 1
        try:
            yield
        finally:
            self.depth[stage] -= 1
            self.seconds[stage] += time.perf_counter() - start

    @contextmanager
    def paused(self) -> Iterator[None]:
        """Time nothing inside (the main process decoding and transforming a batch the
        workers sent encoded: that counts in its `wait`, not in a worker's stages)."""
        enabled, self.enabled = self.enabled, False
        try:
            yield
        finally:
            self.enabled = enabled

    def add_step(self, name: str, seconds: float) -> None:
        """One transform step's time, under its class name."""
        self.steps[name] = self.steps.get(name, 0.0) + seconds

    def take(self, samples: int, collate_s: float, ended: float) -> StageTimes:
        """The sums of the batch just collated, as its `StageTimes`, and start anew. With a
        timed fetch, the decode is its time outside read and transform (a decode marked
        inside it is part of that); without (a stream), what was marked as decode."""
        sums = self.seconds
        outside = sums[FETCH] - sums["read"] - sums["transform"]
        decode = max(0.0, outside) if sums[FETCH] > 0 else sums["decode"]
        seconds = {
            "read": sums["read"],
            "decode": decode,
            "transform": sums["transform"],
            "collate": collate_s,
        }
        info = get_worker_info()
        worker = info.id if info is not None else -1
        began = self.began if self.began is not None else ended - collate_s
        times = StageTimes(samples, seconds, self.steps, worker, began, ended)
        self.reset()
        return times


SUMS = StageSums()  # one per process: each loader worker has its own

F = TypeVar("F", bound=Callable[..., Any])


def timed_stage(stage: str) -> Callable[[F], F]:
    """Decorate a function whose every call is `stage`: read (a reader of bytes), decode or
    transform; anything else is refused here, when the code is imported, not mid-run."""
    if stage not in TIMED:
        raise ValueError(
            f"timed_stage({stage!r}): a sample's code marks one of {list(TIMED)}; collate is "
            "timed around loader.collate_fn, and wait, h2d and step in the main process."
        )

    def decorate(function: F) -> F:
        @functools.wraps(function)
        def timed(*args: Any, **kwargs: Any) -> Any:
            with SUMS.timed(stage):
                return function(*args, **kwargs)

        return timed  # type: ignore[return-value]

    return decorate


def split_times(batch: Any) -> tuple[Any, StageTimes | None]:
    """The batch without its `StageTimes` (wherever in its trailing fields), and the times."""
    if isinstance(batch, tuple | list):
        for i in range(len(batch) - 1, max(-1, len(batch) - 3), -1):
            if isinstance(batch[i], StageTimes):
                return (*batch[:i], *batch[i + 1 :]), batch[i]
    return batch, None
