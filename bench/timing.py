"""Timing one pipeline (images/s, CPU per image, first batch, peak memory) and summarising
interleaved repeats: medians, spread, and ratios paired within each round."""

from __future__ import annotations

import gc
import statistics
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import torch

from src.training.resources import ProcessTreeMonitor

PAGE = 4096
RSS_EVERY_S = 0.05  # seconds between memory samples (each costs ~1 ms: not per batch)


def touch(x: torch.Tensor) -> int:
    """Read one value per memory page of `x`, as the model's first read would (page faults of
    shared-memory batches land here, for every pipeline alike); returns the batch size."""
    flat = x.reshape(-1) if x.is_contiguous() else x.contiguous().reshape(-1)
    flat[:: max(1, PAGE // x.element_size())].sum()
    return len(x)


@dataclass
class Candidate:
    """One row: `start` builds the pipeline and returns its batches (workers start there);
    `finish` turns a batch into what the consumer gets and returns its image count."""

    name: str
    start: Callable[[], Iterator[Any]]
    finish: Callable[[Any], int]


@dataclass
class Sample:
    """One measured pass of a candidate."""

    rate: float  # images/s over the timed batches
    cpu_ms: float  # CPU ms per image over the timed batches, main process + workers
    first_s: float  # from building the pipeline to its first batch
    peak_mb: float  # largest summed RSS of main process + workers seen
    wait_frac: float  # share of the timed window spent waiting for the next batch


def measure(candidate: Candidate, warmup: int, batches: int) -> Sample:
    """Build, take the first batch, `warmup` more, then time `batches`; tear down."""
    monitor = ProcessTreeMonitor()
    start = time.perf_counter()
    stream = candidate.start()
    candidate.finish(next(stream))
    first_s = time.perf_counter() - start
    for _ in range(warmup):
        candidate.finish(next(stream))
    monitor.sample()
    cpu_start, t0, images = monitor.cpu_seconds(), time.perf_counter(), 0
    sampled, waited = t0, 0.0
    for _ in range(batches):
        before = time.perf_counter()
        batch = next(stream)
        waited += time.perf_counter() - before
        images += candidate.finish(batch)
        if time.perf_counter() - sampled > RSS_EVERY_S:
            monitor.sample()
            sampled = time.perf_counter()
    elapsed = time.perf_counter() - t0
    cpu = monitor.cpu_seconds() - cpu_start
    monitor.sample()
    close = getattr(stream, "close", None)
    if close is not None:
        close()
    del stream
    gc.collect()  # shut this pipeline's workers down before the next one starts
    peak_mb = monitor.peak_rss_bytes / 2**20
    return Sample(images / elapsed, 1000.0 * cpu / images, first_s, peak_mb, waited / elapsed)


@dataclass
class Results:
    """Samples per candidate name, in the order the names were first seen."""

    samples: dict[str, list[Sample]] = field(default_factory=dict)

    def add(self, name: str, sample: Sample) -> None:
        self.samples.setdefault(name, []).append(sample)


def interleave(
    candidates: list[Candidate], repeats: int, warmup: int, batches: int, log: Callable[[str], None]
) -> Results:
    """`repeats` rounds; each round measures every candidate once, in an order rotated per
    round, so slow drifts of a shared machine hit every candidate alike."""
    results = Results({c.name: [] for c in candidates})
    for round_ in range(repeats):
        shift = round_ % len(candidates)
        for candidate in candidates[shift:] + candidates[:shift]:
            sample = measure(candidate, warmup, batches)
            results.add(candidate.name, sample)
            log(f"  round {round_ + 1}/{repeats} {candidate.name}: {sample.rate:.0f} images/s")
    return results


def spread(values: list[float]) -> str:
    """`median [min-max]`, rounded to what the spread justifies."""
    digits = 0 if statistics.median(values) >= 100 else 1 if statistics.median(values) >= 1 else 3
    med, low, high = statistics.median(values), min(values), max(values)
    return f"{med:.{digits}f} [{low:.{digits}f}-{high:.{digits}f}]"


def paired_ratio(results: Results, name: str, reference: str) -> float:
    """Median over rounds of rate(name) / rate(reference) measured in the same round."""
    pairs = zip(results.samples[name], results.samples[reference], strict=True)
    return statistics.median(a.rate / b.rate for a, b in pairs)
