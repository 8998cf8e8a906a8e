"""The one batch-timing primitive (engine/src/engine/measure/timing.py) on a fake clock: every number exact."""

from __future__ import annotations

from collections.abc import Iterator

import torch

from engine.measure.timing import BatchMeter, Spread, time_window


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


class FakeResources:
    """CPU seconds that the test sets; RSS readings from a list, one per sample() call."""

    def __init__(self, readings: list[int]) -> None:
        self.readings, self.peak_rss_bytes, self.cpu = readings, 0, 0.0

    def sample(self) -> None:
        self.peak_rss_bytes = max(self.peak_rss_bytes, self.readings.pop(0))

    def cpu_seconds(self) -> float:
        return self.cpu


def batches(clock: FakeClock, waits: list[float], size: int) -> Iterator[tuple]:
    """Batches of `size` labelled samples, each arriving `waits[i]` seconds after it is asked."""
    for wait in waits:
        clock.now += wait
        yield torch.zeros(size, 1), torch.zeros(size)


def test_warmup_window_rates_wait_cpu_and_memory_are_exact() -> None:
    clock = FakeClock()
    resources = FakeResources([100, 300, 200, 250, 150, 120, 110])  # start, 5 batches, stop

    def build() -> Iterator[tuple]:
        clock.now += 0.5  # building the pipeline counts in first_batch_s
        return batches(clock, [1.0, 0.25, 0.25, 0.25, 0.25], size=4)

    def step(batch: tuple) -> None:
        clock.now += 0.25
        resources.cpu += 0.5

    meter = BatchMeter(clock, lambda: resources)
    window = time_window(meter, build, warmup=2, batches=3, step=step)
    # t: 0 start, 0.5 built, 1.5 batch 0, 2.25 window opens (after 2 warm-up batches and
    # their steps), 2.5 / 3.0 / 3.5 batches 2-4, each followed by a 0.25 s step, 3.75 stop
    assert window.first_batch_s == 1.5
    assert window.elapsed_s == 1.5
    assert (window.batches, window.samples, window.total_samples) == (3, 12, 20)
    assert window.samples_per_s == 8.0
    assert window.batches_per_s == 2.0
    assert window.wait_s == 0.75
    assert window.data_wait_frac == 0.5
    assert window.cpu_s == 2.5  # 5 steps x 0.5 s, from start()
    assert window.cpu_ms_per_sample == 125.0  # start-up and warm-up included: 2.5 s / 20
    assert window.peak_rss_bytes == 300


def test_a_lookahead_counts_the_loaders_own_deliveries() -> None:
    clock = FakeClock()

    def ahead(delivered: Iterator[tuple]) -> Iterator[tuple]:
        """Asks for the next batch before handing over the current one (a device prefetch)."""
        ready = next(delivered)
        for batch in delivered:
            yield ready
            ready = batch

    meter = BatchMeter(clock)
    window = time_window(meter, lambda: batches(clock, [1.0] * 10, 2), 1, 2, consume=ahead)
    # deliveries at t = 1 .. 4; the window opens at t = 2, after the 2nd arrived (1 ahead)
    assert (window.first_batch_s, window.elapsed_s, window.batches) == (1.0, 2.0, 2)
    assert (window.samples_per_s, window.data_wait_frac, window.cpu_s) == (2.0, 1.0, 0.0)


def test_the_loop_counts_from_start_and_may_recount_samples() -> None:
    clock = FakeClock()
    meter = BatchMeter(clock)
    for _ in meter.timed(batches(clock, [2.0, 1.0, 1.0, 1.0], 8), limit=3):
        clock.now += 1.0  # the training step
        assert meter.running_s() == clock.now
    assert meter.batches == 3  # the limit
    window = meter.stop(samples=20)  # e.g. what the ranks trained on together
    assert (window.first_batch_s, window.elapsed_s, window.wait_s) == (2.0, 7.0, 4.0)
    assert (window.samples, window.total_samples, window.samples_per_s) == (20, 24, 20 / 7)


def test_spread_and_overlap() -> None:
    assert Spread.of([3.0, 1.0, 2.0]) == Spread(2.0, 1.0, 3.0)
    assert Spread(5, 4, 6).overlaps(Spread(7, 6, 8))  # touching ranges cannot be told apart
    assert not Spread(5, 4, 6).overlaps(Spread(8, 6.5, 9))
