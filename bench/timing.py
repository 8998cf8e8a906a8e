"""Timing one pipeline (images/s, CPU per image, first batch, peak memory) and summarising
interleaved repeats: medians, spread, and ratios paired within each round."""

from __future__ import annotations

import gc
import statistics
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import torch

from engine.measure.resources import ProcessTreeMonitor
from engine.measure.timing import BatchMeter, time_window

PAGE = 4096


def touch(x: torch.Tensor) -> None:
    """Read one value per memory page of `x`, as the model's first read would (page faults of
    shared-memory batches land here, for every pipeline alike)."""
    flat = x.reshape(-1) if x.is_contiguous() else x.contiguous().reshape(-1)
    flat[:: max(1, PAGE // x.element_size())].sum()


def images_in(batch: Any) -> int:
    """Images in a batch: a tensor of them, or (images, labels, ...)."""
    return len(batch) if isinstance(batch, torch.Tensor) else len(batch[0])


@dataclass
class Candidate:
    """One row: `start` builds the pipeline and returns its batches (workers start there);
    `finish` turns a batch into what the consumer gets."""

    name: str
    start: Callable[[], Iterator[Any]]
    finish: Callable[[Any], Any]


@dataclass
class Sample:
    """One measured pass of a candidate (engine/src/engine/measure/timing.py's window)."""

    rate: float  # images/s over the timed batches
    cpu_ms: float  # CPU ms per image, main process + workers, from building the pipeline on
    first_s: float  # from building the pipeline to its first batch
    peak_mb: float  # largest summed RSS of main process + workers seen
    wait_frac: float  # share of the timed window spent waiting for the next batch


def measure(candidate: Candidate, warmup: int, batches: int) -> Sample:
    """Build, take the first batch and `warmup` more, then time `batches`; tear down."""
    meter = BatchMeter(resources=ProcessTreeMonitor, size=images_in)
    window = time_window(meter, candidate.start, 1 + warmup, batches, step=candidate.finish)
    gc.collect()  # shut this pipeline's workers down before the next one starts
    return Sample(
        window.samples_per_s,
        window.cpu_ms_per_sample,
        window.first_batch_s,
        window.peak_rss_bytes / 2**20,
        window.data_wait_frac,
    )


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
