"""`loader.num_workers=auto`: time a few batches at each candidate worker count in rotated
rounds and keep the fewest workers whose range of rates overlaps the fastest's."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import replace

from torch.utils.data import Dataset, IterableDataset, Sampler

from engine.core.cpus import available_cpus
from engine.data.loader_settings import LoaderSettings
from engine.data.loaders import endless, make_loader
from engine.measure.timing import BatchMeter, Spread, time_window

log = logging.getLogger(__name__)

WARMUP_BATCHES = 2  # absorb worker start-up and first-touch costs
MEASURED_BATCHES = 8  # batches timed per candidate and round
ROUNDS = 3  # every candidate is timed once per round, in an order rotated per round


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
    """Samples/s over MEASURED_BATCHES after WARMUP_BATCHES (no pinning, no model); the
    loader's workers stop before it returns."""
    loader = make_loader(dataset, settings, sampler, drop_last=False)
    window = time_window(BatchMeter(), lambda: endless(loader), WARMUP_BATCHES, MEASURED_BATCHES)
    return window.samples_per_s


def choose_workers(rates: dict[int, Spread]) -> int:
    """The fewest workers whose range of rates overlaps the fastest count's (the one with the
    highest median): the repeats cannot tell them apart, and fewer processes cost less memory
    and start-up."""
    best = max(rates.values(), key=lambda spread: spread.median)
    return min(n for n, spread in rates.items() if spread.overlaps(best))


def measured_workers(
    dataset: Dataset,
    settings: LoaderSettings,
    sampler_factory: Callable[[Dataset], Sampler],
    candidates: list[int] | None = None,
) -> int:
    """The worker count `choose_workers` picks from rates measured on `dataset` (every
    candidate once per round); the table of rates is logged."""
    candidates = candidates if candidates is not None else worker_candidates(available_cpus())
    sampler = None if isinstance(dataset, IterableDataset) else sampler_factory(dataset)
    samples: dict[int, list[float]] = {n: [] for n in candidates}
    for round_ in range(ROUNDS):
        shift = round_ % len(candidates)
        for n in candidates[shift:] + candidates[:shift]:
            trial, _ = replace(settings, num_workers=n).applicable(cuda=False)
            samples[n].append(measure_samples_per_s(dataset, trial, sampler))
    rates = {n: Spread.of(values) for n, values in samples.items()}
    chosen = choose_workers(rates)
    table = ", ".join(
        f"{n}: {r.median:.0f} [{r.low:.0f}-{r.high:.0f}]" for n, r in sorted(rates.items())
    )
    log.info(
        "loader.num_workers=auto measured samples/s per worker count, median [min-max] of %d "
        "rounds {%s}; chose %d (the fewest whose range overlaps the fastest's)",
        ROUNDS,
        table,
        chosen,
    )
    return chosen
