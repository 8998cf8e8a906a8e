"""The one way batches are timed: mode=benchmark, loader.num_workers=auto, the training loop's
data-wait meter and `make bench` all measure with `BatchMeter` (and `time_window`).

    meter = BatchMeter(resources=ProcessTreeMonitor)  # CPU and RSS of main + workers
    for batch in meter.timed(loader):                 # starts the clock, times every next()
        ...
    window = meter.stop()                             # a `Window`: samples/s, data wait, ...

start() ── first delivery ── ... open_window() ── deliveries in the window ── stop()
 first_batch_s: start() to the first delivery's arrival (iterator creation, worker start-up)
 the window: open_window() (default: start()) to stop(); its rate, batches and data wait count
   only the deliveries made inside it (the earlier ones are the warm-up)
 CPU: start() to stop(), per sample delivered since start() (start-up included)
 peak RSS: sampled every RSS_EVERY_S seconds from start() to stop()
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

import torch

T = TypeVar("T")
RSS_EVERY_S = 0.05  # seconds between memory samples (each costs ~1 ms: not one per batch)


class Resources(Protocol):
    """What `BatchMeter` reads of the process tree (measure/resources.py: ProcessTreeMonitor)."""

    peak_rss_bytes: int

    def sample(self) -> None: ...

    def cpu_seconds(self) -> float: ...


def labelled_batch_size(batch: Any) -> int:
    """Samples in an (inputs, labels, ...) batch: the length of its labels."""
    return len(batch[1])


@dataclass(frozen=True)
class Window:
    """What one timed pass measured (see the module docstring for each span)."""

    first_batch_s: float  # start() to the arrival of the first batch
    elapsed_s: float  # the timed window
    wait_s: float  # time blocked in next() for the deliveries inside the window
    batches: int  # deliveries inside the window
    samples: int  # samples in those deliveries (or what stop() was told)
    total_samples: int  # samples delivered since start()
    cpu_s: float  # CPU seconds of main process + workers since start(); 0 without resources
    peak_rss_bytes: int  # largest summed RSS of main process + workers; 0 without resources

    @property
    def samples_per_s(self) -> float:
        return self.samples / self.elapsed_s if self.elapsed_s > 0 else 0.0

    @property
    def batches_per_s(self) -> float:
        return self.batches / self.elapsed_s if self.elapsed_s > 0 else 0.0

    @property
    def data_wait_frac(self) -> float:
        """Share of the window spent waiting for the next batch."""
        return self.wait_s / self.elapsed_s if self.elapsed_s > 0 else 0.0

    @property
    def cpu_ms_per_sample(self) -> float:
        return 1000.0 * self.cpu_s / self.total_samples if self.total_samples else 0.0

    def pass_metrics(self, split: str) -> dict[str, float]:
        """A training pass's timing as `<split>/samples_per_s`, `data_wait_frac`,
        `first_batch_s`, `epoch_s` and `samples` (what the run's summary adds up)."""
        return {
            f"{split}/samples_per_s": self.samples_per_s,
            f"{split}/data_wait_frac": self.data_wait_frac,
            f"{split}/first_batch_s": self.first_batch_s,
            f"{split}/epoch_s": self.elapsed_s,
            f"{split}/samples": self.samples,
        }


class BatchMeter:
    """Times the deliveries of one batch iterable; `clock` and `resources` are injectable (a
    fake clock makes every number exact in tests)."""

    def __init__(
        self,
        clock: Callable[[], float] = time.perf_counter,
        resources: Callable[[], Resources] | None = None,
        size: Callable[[Any], int] = labelled_batch_size,
    ) -> None:
        self.clock, self._resources, self.size = clock, resources, size
        self.batches = 0  # deliveries since start()
        self._monitor: Resources | None = None
        self._started: float | None = None
        self._first = self._opened = self._wait = 0.0
        self._opened_at_batch = self._samples = self._window_samples = 0
        self._sampled = 0.0

    def start(self) -> None:
        """Start the clock (and the CPU count): first_batch_s and the default window begin."""
        self._monitor = self._resources() if self._resources is not None else None
        self._started = self._opened = self._sampled = self.clock()
        if self._monitor is not None:
            self._monitor.sample()

    def open_window(self) -> None:
        """The timed window begins now (the deliveries so far were the warm-up)."""
        self._opened, self._opened_at_batch = self.clock(), self.batches
        self._wait, self._window_samples = 0.0, 0

    def leave_out(self, seconds: float) -> None:
        """`seconds` just spent outside the pass (a compile) are not the window's: it opens
        that much later."""
        self._opened += seconds

    def running_s(self) -> float:
        """Seconds since the window opened."""
        return self.clock() - self._opened

    def timed(self, batches: Iterable[T], limit: int | None = None) -> Iterator[T]:
        """Up to `limit` batches of `batches`, each wait timed; starts the clock unless
        start() was called (so a pipeline built after start() counts in first_batch_s)."""
        if self._started is None:
            self.start()
        return self._deliveries(batches, limit)

    def _deliveries(self, batches: Iterable[T], limit: int | None) -> Iterator[T]:
        it = iter(batches)
        try:
            while limit is None or self.batches < limit:
                asked = self.clock()
                try:
                    batch = next(it)
                except StopIteration:
                    return
                now = self.clock()
                if self.batches == 0:
                    self._first = now - self._started  # type: ignore[operator]
                samples = self.size(batch)
                self.batches += 1
                self._samples += samples
                self._wait += now - asked
                self._window_samples += samples
                if self._monitor is not None and now - self._sampled >= RSS_EVERY_S:
                    self._monitor.sample()
                    self._sampled = now
                yield batch
        finally:
            close = getattr(it, "close", None)  # a generator over a loader: its workers stop
            if close is not None:
                close()

    def stop(self, samples: int | None = None) -> Window:
        """Close the window; `samples` replaces the count of samples delivered in it (the
        loop counts what it trained on, over every rank)."""
        elapsed = self.clock() - self._opened
        cpu_s, peak = 0.0, 0
        if self._monitor is not None:
            self._monitor.sample()
            cpu_s, peak = self._monitor.cpu_seconds(), self._monitor.peak_rss_bytes
        return Window(
            first_batch_s=self._first,
            elapsed_s=elapsed,
            wait_s=self._wait,
            batches=self.batches - self._opened_at_batch,
            samples=self._window_samples if samples is None else samples,
            total_samples=self._samples,
            cpu_s=cpu_s,
            peak_rss_bytes=peak,
        )


def time_window(
    meter: BatchMeter,
    open_batches: Callable[[], Iterable[Any]],
    warmup: int,
    batches: int,
    consume: Callable[[Iterator[Any]], Iterator[Any]] | None = None,
    step: Callable[[Any], Any] | None = None,
    opened: Callable[[], Any] | None = None,
) -> Window:
    """Start `meter`, build the batches (`open_batches`, counted in first_batch_s), take
    `warmup` untimed and `batches` timed ones through `consume` (e.g. a device lookahead,
    which asks the loader one batch ahead) into `step`; the window closes after the last
    step (CUDA work included), then the batches are closed (their workers stop). `opened`
    is called as the window opens (a stage log drops the warm-up)."""
    meter.start()
    delivered = meter.timed(open_batches())
    consumed = consume(delivered) if consume is not None else delivered
    for i in range(warmup + batches):
        if i == warmup:
            meter.open_window()
            if opened is not None:
                opened()
        batch = next(consumed)
        if step is not None:
            step(batch)
    if torch.cuda.is_initialized():
        torch.cuda.synchronize()
    window = meter.stop()
    for stream in (consumed, delivered):
        getattr(stream, "close", lambda: None)()  # a generator over a loader: workers stop
    return window


@dataclass(frozen=True)
class Spread:
    """Repeated measurements of one quantity: their median and range."""

    median: float
    low: float
    high: float

    @classmethod
    def of(cls, values: Iterable[float]) -> Spread:
        ordered = sorted(values)
        return cls(statistics.median(ordered), ordered[0], ordered[-1])

    def overlaps(self, other: Spread) -> bool:
        """Whether the two ranges share a value: the repeats cannot tell them apart."""
        return self.low <= other.high and other.low <= self.high
