"""One epoch of a mix of sources: how many samples each source gives (its weight's share) and
which. Pure functions of the generator, which the train order seeds from (seed, epoch): the
draw repeats exactly on resume, whatever the worker count, and every DDP rank draws the same."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated, NamedTuple

import numpy as np
import torch

from engine.core.bounds import Bound
from engine.data.balance import balance_weights

# Each epoch's order of a mix is drawn up front, each index a Python int (a repeat a `Draw`):
# ~600 bytes and ~3.5 us a sample (2,000,000 took 1.2 GB and 7 s), so 2**31 died in bad_alloc.
# More samples than this per epoch are more epochs.
MAX_EPOCH_SAMPLES = 10_000_000
EpochSamples = Annotated[int, Bound(1, MAX_EPOCH_SAMPLES)]


class Stratum(NamedTuple):
    """One source inside a concatenation: its indices [start, stop) and its epoch weight."""

    name: str
    start: int
    stop: int
    weight: float

    @property
    def size(self) -> int:
        return self.stop - self.start


def shares(weights: Sequence[float], total: int) -> list[int]:
    """`total` split in the proportions of `weights` (largest remainder): the counts add up to
    `total` exactly and each is within one sample of its exact share. The weights are scaled
    by the largest first: two of 1.7e308 sum to inf, which made every share 0."""
    scaled = np.asarray(weights, dtype=np.float64)
    if scaled.size:  # no weights: no shares
        scaled = scaled / scaled.max()
    exact = scaled / scaled.sum() * total
    counts = np.floor(exact).astype(np.int64)
    ahead = np.argsort(counts - exact, kind="stable")  # largest remainder first
    counts[ahead[: total - int(counts.sum())]] += 1
    return counts.tolist()


def cycled(
    size: int, count: int, generator: torch.Generator, in_order: bool = False
) -> torch.Tensor:
    """`count` indices of range(`size`): whole random permutations, then the start of one
    more. Every index is drawn once before any is drawn twice; with `count` <= `size` it is a
    subsample without replacement. `in_order`: each permutation sorted (sampler=sequential)."""
    whole, rest = divmod(count, size)
    if in_order:
        parts = [torch.arange(size)] * whole
        parts.append(torch.randperm(size, generator=generator)[:rest].sort().values)
    else:
        parts = [torch.randperm(size, generator=generator) for _ in range(whole + 1)]
        parts[-1] = parts[-1][:rest]
    return torch.cat(parts)


def interleaved(parts: Sequence[torch.Tensor], generator: torch.Generator) -> torch.Tensor:
    """The sources' draws `parts` in one random order that keeps each source's own order (so a
    repeat still comes after every sample of its source was drawn once)."""
    which = torch.cat([torch.full((len(p),), k) for k, p in enumerate(parts)])
    which = which[torch.randperm(len(which), generator=generator)]
    order = torch.empty(len(which), dtype=torch.int64)
    for k, part in enumerate(parts):
        order[which == k] = part
    return order


def population(
    strata: Sequence[Stratum], total: int, generator: torch.Generator, in_order: bool = False
) -> torch.Tensor:
    """The `total` concatenation indices of one epoch, in order: each stratum's share
    (`shares`) drawn by `cycled` from its own indices, the strata interleaved at random;
    `in_order` (sampler=sequential): stratum after stratum, each in its own order."""
    counts = shares([s.weight for s in strata], total)
    parts = [
        cycled(s.size, k, generator, in_order) + s.start
        for s, k in zip(strata, counts, strict=True)
    ]
    return torch.cat(parts) if in_order else interleaved(parts, generator)


def balanced_population(
    strata: Sequence[Stratum],
    total: int,
    targets: np.ndarray,
    replacement: bool,
    generator: torch.Generator,
) -> torch.Tensor:
    """sampler=weighted over a mix: each stratum keeps its share of `total`, drawn from its
    samples with weight 1 / count(class within the stratum) (multi-label: of its rarest label
    there, engine/data/balance.py), so every source keeps its weight and its classes are drawn
    equally often within it; the strata interleaved at random."""
    parts = []
    for stratum, count in zip(strata, shares([s.weight for s in strata], total), strict=True):
        drawn = torch.zeros(0, dtype=torch.int64)
        if count:
            labels = targets[stratum.start : stratum.stop]
            weights = balance_weights(labels)
            drawn = torch.multinomial(weights, count, replacement, generator=generator)
        parts.append(drawn + stratum.start)
    return interleaved(parts, generator)
