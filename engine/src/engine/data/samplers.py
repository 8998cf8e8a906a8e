"""Train-order samplers for the `sampler` config group (each takes the train dataset).

Every order is a pure function of (seed, epoch): runs repeat exactly whatever the worker count,
and a resumed run can start the interrupted epoch at the batch where it stopped. In a distributed
job every rank draws the same order and keeps its own share of it (`distribute`). Over a mix
of sources (a dataset with `epoch_samples`), an epoch's order is drawn over that epoch's
population (engine/data/mix.py): each source's share, repeats marked as `Draw`s.
"""

from __future__ import annotations

import itertools
import math
from abc import ABC, abstractmethod
from collections.abc import Iterator, Sized

import numpy as np
import torch
from torch.utils.data import Sampler

from engine.core.bounds import Positive
from engine.core.seeding import derive_seed
from engine.data.balance import balance_weights
from engine.data.mix import Stratum, balanced_population, population, shares
from engine.data.targets import rarest_labels


class Draw(int):
    """An index drawn again within one epoch (sampling with replacement); `occurrence` (1, 2,
    ...) gives each repeat its own augmentation seed (engine.data.seeded) instead of a copy."""

    occurrence: int

    def __new__(cls, index: int, occurrence: int) -> Draw:
        draw = super().__new__(cls, index)
        draw.occurrence = occurrence
        return draw

    def __reduce__(self) -> tuple[type, tuple[int, int]]:  # keeps `occurrence` in workers
        return (Draw, (int(self), self.occurrence))


def _in_chunks(order: torch.Tensor, size: int = 8192) -> Iterator[int]:
    """The indices of `order` as ints, converted a chunk at a time: the first batch does not
    wait for a million-entry list (epoch re-entry, BENCHMARKS.md); chained in C, so each index
    costs the batch sampler's `next` no Python frame."""
    return itertools.chain.from_iterable(chunk.tolist() for chunk in order.split(size))


def _mark_repeats(order: list[int]) -> list[int]:
    """`order` with every index after its first appearance replaced by a numbered `Draw`."""
    seen: dict[int, int] = {}
    marked: list[int] = []
    for index in order:
        count = seen.get(index, 0)
        seen[index] = count + 1
        marked.append(Draw(index, count) if count else index)
    return marked


def _mixed(dataset: Sized) -> tuple[int, tuple[Stratum, ...]]:
    """(samples one epoch draws, the sources they are drawn from): a mix's `epoch_samples`
    over its `sources`, else every index once (no sources)."""
    size = getattr(dataset, "epoch_samples", None)
    if size is None:
        return len(dataset), ()
    return size, tuple(dataset.sources)  # type: ignore[attr-defined]


class EpochSampler(Sampler[int], ABC):
    """Draws each epoch's order from (seed, epoch); `distribute` keeps one rank's share of it;
    `skip` starts the next pass part-way into it.

    Rank r's share is every world_size-th position from r, so the k-th batch of every rank
    together covers one contiguous stretch of the order: an optimizer step of a global batch
    G (batch_size x ranks x grad_accum) trains on positions [s*G, (s+1)*G) whatever the
    ranks and batch size that make up G. That is what lets a run stopped mid-epoch go on with
    another number of ranks (`skip` counts positions of the whole order, before sharing)."""

    repeats = False  # whether an order may hold an index twice (draws with replacement)

    def __init__(self, num_samples: int, seed: int) -> None:
        self.num_samples = num_samples
        self.seed = seed
        self.epoch = 0
        self._skip = 0  # positions of the order the next pass leaves out
        self.started_at = 0  # positions the current pass left out
        self.rank, self.world_size, self.pad = 0, 1, True

    @abstractmethod
    def order(self, generator: torch.Generator) -> torch.Tensor:
        """The full order of one epoch (indices into the dataset) drawn from `generator`."""

    def set_epoch(self, epoch: int) -> None:
        """Select the epoch whose order the next pass yields (called by the loop)."""
        self.epoch = epoch

    def distribute(self, rank: int, world_size: int, pad: bool = True) -> None:
        """Yield only rank `rank`'s share of each order: every `world_size`-th position from
        `rank`. With `pad` (training) the order is first extended by its own beginning to a
        multiple of `world_size`, so every rank gets as many samples (and batches) as the
        others; without (validation) each position lands in exactly one share."""
        if not 0 <= rank < world_size:
            raise ValueError(f"rank {rank} is outside a world of {world_size} processes")
        self.rank, self.world_size, self.pad = rank, world_size, pad

    def share_size(self, skipped: int | None = None) -> int:
        """Positions this rank yields of an order whose first `skipped` positions are left
        out (default: the next pass's)."""
        rest = self.num_samples - (self._skip if skipped is None else skipped)
        if self.pad:
            return math.ceil(rest / self.world_size)
        return len(range(self.rank, rest, self.world_size))

    def skip(self, samples: int) -> None:
        """Make the next pass (only) leave out the order's first `samples` positions, those
        of the whole job (every rank skips the same ones): resuming mid-epoch."""
        if not 0 <= samples <= self.num_samples:
            raise ValueError(f"cannot skip {samples} of {self.num_samples} samples")
        self._skip = samples

    def used(self, batches: int, batch_size: int) -> int:
        """Positions of the order the current pass has used, in the whole job, once each rank
        reached batch `batches` (of `batch_size`; the last may be short) of the epoch. The
        batches are numbered as the loop numbers them: a pass that skipped `started_at`
        positions begins with batch started_at // (batch_size x world_size)."""
        first = self.started_at // (batch_size * self.world_size)
        share = self.share_size(self.started_at)
        taken = min((batches - first) * batch_size, share) * self.world_size
        return min(self.started_at + taken, self.num_samples)

    def _share(self, positions: torch.Tensor, start: int) -> torch.Tensor:
        """This rank's share of `positions` (an epoch's order) after its first `start`."""
        rest = positions[start:]
        if self.world_size == 1:
            return rest
        total = self.share_size(start) * self.world_size
        if self.pad and total > len(rest):  # padded with the order's beginning, as ever
            fill = positions.repeat(math.ceil((total - len(rest)) / len(positions)))
            rest = torch.cat([rest, fill[: total - len(rest)]])
        return rest[self.rank :: self.world_size]

    def __iter__(self) -> Iterator[int]:
        generator = torch.Generator().manual_seed(derive_seed(self.seed, self.epoch))
        start, self._skip = self._skip, 0
        self.started_at = start
        order = self.order(generator)
        if not self.repeats:
            return _in_chunks(self._share(order, start))
        drawn = _mark_repeats(order.tolist())  # counted over the whole epoch, before sharing
        positions = self._share(torch.arange(len(order)), start).tolist()
        return iter([drawn[p] for p in positions])

    def __len__(self) -> int:
        return self.share_size()


def block_order(
    size: int, starts: np.ndarray, window: int, generator: torch.Generator
) -> torch.Tensor:
    """A random order of `size` samples stored in blocks (`starts`: each block's first index,
    ascending from 0; a Parquet file's row groups) that keeps reads sequential: the blocks in
    a random order, then the samples shuffled within each run of `window` positions. A window
    spans about window / block size blocks, so a reader keeps those few and reads each block
    once a pass, yet a batch mixes samples of several blocks."""
    ends = np.append(starts[1:], size)
    picked = torch.randperm(len(starts), generator=generator).numpy()
    lengths = (ends - starts)[picked]
    # sample i of the concatenation: its block's first index + its place in the block
    shift = starts[picked] - np.concatenate([[0], np.cumsum(lengths)[:-1]])
    order = torch.from_numpy(np.repeat(shift, lengths) + np.arange(size))
    noise = torch.rand(size, generator=generator, dtype=torch.float64)  # < 1: windows stay apart
    key = torch.div(torch.arange(size), window, rounding_mode="floor").double() + noise
    return order[torch.argsort(key)]


class RandomOrder(EpochSampler):
    """`sampler=random`: a uniform random order without replacement, new every epoch; over a
    dataset stored in blocks (its `blocks` and `shuffle_window`: dataset=parquet), the blocks
    in a random order and the samples shuffled within windows (block_order)."""

    def __init__(self, dataset: Sized, seed: int) -> None:
        size, self.strata = _mixed(dataset)
        super().__init__(size, seed)
        self.repeats = bool(self.strata)
        self.blocks = None if self.strata else getattr(dataset, "blocks", None)
        self.window = int(getattr(dataset, "shuffle_window", 0) or 0)

    def order(self, generator: torch.Generator) -> torch.Tensor:
        if self.strata:
            return population(self.strata, self.num_samples, generator)
        if self.blocks is not None:
            return block_order(self.num_samples, self.blocks, self.window, generator)
        # int32 draws the same permutation as int64, ~40% faster (7 -> 4 ms for 1M indices)
        dtype = torch.int32 if self.num_samples < 2**31 else torch.int64
        return torch.randperm(self.num_samples, generator=generator, dtype=dtype)


class SequentialOrder(EpochSampler):
    """`sampler=sequential`: the dataset's own order, every epoch (a mix: the epoch's
    population source by source, each in its own order, subsampled from seed 0 and the epoch)."""

    def __init__(self, dataset: Sized) -> None:
        size, self.strata = _mixed(dataset)
        super().__init__(size, seed=0)
        self.repeats = bool(self.strata)

    def order(self, generator: torch.Generator) -> torch.Tensor:
        if self.strata:
            return population(self.strata, self.num_samples, generator, in_order=True)
        return torch.arange(self.num_samples)


class FixedOrder(EpochSampler):
    """`sampler=fixed`: one random order drawn from `seed`, repeated identically every epoch
    (debug=overfit: the same mixed batch every epoch; a mix: one population, every epoch)."""

    def __init__(self, dataset: Sized, seed: int) -> None:
        size, self.strata = _mixed(dataset)
        super().__init__(size, seed)
        self.repeats = bool(self.strata)

    def order(self, generator: torch.Generator) -> torch.Tensor:
        once = torch.Generator().manual_seed(self.seed)
        if self.strata:
            return population(self.strata, self.num_samples, once)
        return torch.randperm(self.num_samples, generator=once)


class SpreadSample(EpochSampler):
    """A fixed subset of `size` samples spread over the classes, in dataset order: what a
    limited validation (trainer.limit_val_batches) evaluates every epoch, instead of the
    first batches of a class-sorted val set. The classes take turns (each its own samples in
    dataset order; multi-label: each sample under its rarest label, the unlabelled as one
    more); without `targets`, evenly spaced positions."""

    def __init__(self, dataset: Sized, size: int) -> None:
        n = len(dataset)
        super().__init__(min(size, n), seed=0)
        targets = dataset.targets  # type: ignore[attr-defined]
        if targets is None:
            picked = np.linspace(0, n - 1, self.num_samples).round().astype(np.int64)
        else:
            labels = rarest_labels(targets)
            grouped = np.argsort(labels, kind="stable")  # by class, dataset order within
            first = np.searchsorted(labels[grouped], labels[grouped], side="left")
            turn = np.empty(n, dtype=np.int64)
            turn[grouped] = np.arange(n) - first  # a sample's place within its class
            picked = np.sort(np.lexsort((np.arange(n), turn))[: self.num_samples])
        self.picked = torch.from_numpy(picked)

    def order(self, generator: torch.Generator) -> torch.Tensor:
        return self.picked


class WeightedOrder(EpochSampler):
    """`sampler=weighted`: `num_samples` draws per epoch (default: the dataset's size), each
    sample weighted 1 / count(its class), so every class is drawn equally often on average;
    multi-label `targets` (N, C) weigh a sample by its rarest label (engine/data/balance.py).
    Over a mix (default: its `epoch_samples`) every source keeps its weight's share and the
    classes are balanced within each source (engine/data/mix.py balanced_population)."""

    def __init__(
        self,
        dataset: Sized,
        seed: int,
        replacement: bool = True,
        num_samples: Positive | None = None,
    ) -> None:
        targets = dataset.targets  # type: ignore[attr-defined]
        if targets is None:
            raise ValueError(
                f"sampler=weighted needs per-sample labels, but {type(dataset).__name__} has no "
                "`targets`; use sampler=random or add a `targets` array to the dataset."
            )
        self.targets = np.asarray(targets, dtype=np.int64)
        size, self.strata = _mixed(dataset)
        n = size if num_samples is None else num_samples
        if not replacement:
            _check_drawable(self.strata, n, len(self.targets))
        super().__init__(n, seed)
        self.weights = balance_weights(self.targets)
        self.replacement = replacement
        self.repeats = replacement

    def order(self, generator: torch.Generator) -> torch.Tensor:
        if self.strata:
            return balanced_population(
                self.strata, self.num_samples, self.targets, self.replacement, generator
            )
        return torch.multinomial(
            self.weights, self.num_samples, self.replacement, generator=generator
        )


def _check_drawable(strata: tuple[Stratum, ...], n: int, size: int) -> None:
    """sampler.replacement=false: the epoch's draws (each source's share of them) must fit."""
    for stratum, count in zip(strata, shares([s.weight for s in strata], n), strict=True):
        if count > stratum.size:
            raise ValueError(
                f"sampler.replacement=false: source {stratum.name!r} has {stratum.size} samples "
                f"but its share of the {n} per epoch is {count}; set sampler.replacement=true "
                "or lower sampler.num_samples (or dataset.epoch_samples)."
            )
    if not strata and n > size:
        raise ValueError(
            f"sampler.num_samples={n} exceeds the {size} samples, which "
            "sampler.replacement=false cannot draw; lower it or set replacement=true."
        )
