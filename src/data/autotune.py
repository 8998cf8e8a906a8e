"""`loader.num_workers=auto`: time a few batches at each candidate worker count and keep the
fewest workers within 5% of the fastest."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import replace

from torch.utils.data import Dataset, IterableDataset, Sampler

from src.data.loader_settings import LoaderSettings
from src.data.loaders import endless, make_loader
from src.utils.cpus import available_cpus

log = logging.getLogger(__name__)

WARMUP_BATCHES = 2  # absorb worker start-up and first-touch costs
MEASURED_BATCHES = 8  # batches timed per candidate
TIE_TOLERANCE = 0.05  # within 5% of the best, fewer workers win (less memory, less start-up)


def worker_candidates(cpus: int) -> list[int]:
    """0, 1, 2, 4, ... up to the usable core count (which is always included)."""
    candidates, n = [0], 1
    while n < cpus:
        candidates.append(n)
        n *= 2
    return sorted({*candidates, cpus})


def measure_samples_per_s(
    dataset: Dataset, settings: LoaderSettings, sampler: Sampler | None
) -> float:
    """Samples/s over MEASURED_BATCHES after WARMUP_BATCHES (no pinning, no model)."""
    loader = make_loader(dataset, settings, sampler, drop_last=False)
    batches = endless(loader)
    for _ in range(WARMUP_BATCHES):
        next(batches)
    samples, start = 0, time.perf_counter()
    for _, batch in zip(range(MEASURED_BATCHES), batches, strict=False):
        samples += len(batch[1])
    elapsed = time.perf_counter() - start
    del batches  # shut the workers down before the next candidate starts its own
    return samples / elapsed if elapsed > 0 else 0.0


def choose_workers(rates: dict[int, float]) -> int:
    """The fewest workers whose rate is within TIE_TOLERANCE of the best."""
    best = max(rates.values())
    return min(n for n, rate in rates.items() if rate >= (1 - TIE_TOLERANCE) * best)


def measured_workers(
    dataset: Dataset,
    settings: LoaderSettings,
    sampler_factory: Callable[[Dataset], Sampler],
    candidates: list[int] | None = None,
) -> int:
    """The worker count `choose_workers` picks from rates measured on `dataset`; the table of
    rates is logged."""
    candidates = candidates if candidates is not None else worker_candidates(available_cpus())
    sampler = None if isinstance(dataset, IterableDataset) else sampler_factory(dataset)
    rates = {}
    for n in candidates:
        trial, _ = replace(settings, num_workers=n).applicable(cuda=False)
        rates[n] = measure_samples_per_s(dataset, trial, sampler)
    chosen = choose_workers(rates)
    table = ", ".join(f"{n}: {rate:.0f}" for n, rate in sorted(rates.items()))
    log.info(
        "loader.num_workers=auto measured samples/s per worker count {%s}; chose %d",
        table,
        chosen,
    )
    return chosen
