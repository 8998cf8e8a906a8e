"""Per-pass timing: how long the loop waited for data versus everything else."""

from __future__ import annotations

import time
from collections.abc import Iterable, Iterator
from typing import TypeVar

T = TypeVar("T")


class LoaderTimer:
    """Wraps a loader iterable and measures the time spent blocked in `next()`.

    `data_wait_frac` near 1 means the model starves for data (raise loader.num_workers);
    near 0 means compute is the bottleneck.
    """

    def __init__(self) -> None:
        self.data_wait_s = 0.0
        self.first_batch_s = 0.0
        self.batches = 0
        self.samples = 0
        self._start = 0.0
        self.elapsed_s = 0.0

    def iterate(self, loader: Iterable[T], limit: int | None = None) -> Iterator[T]:
        """Yield up to `limit` batches from `loader`, timing each wait."""
        self._start = time.perf_counter()
        it = iter(loader)
        while limit is None or self.batches < limit:
            t0 = time.perf_counter()
            try:
                batch = next(it)
            except StopIteration:
                break
            waited = time.perf_counter() - t0
            self.data_wait_s += waited
            if self.batches == 0:
                self.first_batch_s = time.perf_counter() - self._start
            self.batches += 1
            yield batch

    def running_s(self) -> float:
        """Seconds since `iterate` began."""
        return time.perf_counter() - self._start

    def stop(self, samples: int) -> None:
        """Close the epoch: `samples` seen since `iterate` began."""
        self.elapsed_s = self.running_s()
        self.samples = samples

    @property
    def samples_per_s(self) -> float:
        return self.samples / self.elapsed_s if self.elapsed_s > 0 else 0.0

    @property
    def data_wait_frac(self) -> float:
        return self.data_wait_s / self.elapsed_s if self.elapsed_s > 0 else 0.0
