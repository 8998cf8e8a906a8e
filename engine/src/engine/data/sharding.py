"""Each rank's share of the data in a distributed job (one process per device).

Train: every rank draws the same (seed, epoch) order and keeps every world_size-th position,
padded with the order's beginning so all ranks run as many batches; a stream is split by shard.
Val: the dataset's order split without padding, so each sample is evaluated exactly once in
the job and the all-reduced totals equal a single process's. A limited validation
(trainer.limit_val_batches) evaluates a fixed sample spread over the classes.
"""

from __future__ import annotations

from torch.utils.data import Dataset, IterableDataset, Sampler, SequentialSampler

from engine.data.datasets.base import StreamDataset
from engine.data.samplers import EpochSampler, SequentialOrder, SpreadSample


def share_train(dataset: Dataset, sampler: Sampler | None, rank: int, world_size: int) -> None:
    """Make the train `sampler` (or, for a stream, the `dataset`) yield only this rank's share."""
    if world_size == 1:
        return
    if sampler is None:
        _share_stream(dataset, rank, world_size, "train")
    elif isinstance(sampler, EpochSampler):
        sampler.distribute(rank, world_size, pad=True)
    else:
        raise ValueError(
            f"sampler: a {type(sampler).__name__} cannot be split across the {world_size} ranks "
            "of this job; use one of the sampler group's options (random, sequential, weighted, "
            "fixed) or subclass engine.api.EpochSampler."
        )


def val_order(
    dataset: Dataset, rank: int, world_size: int, limit: int | None = None
) -> Sampler | None:
    """The val order: the dataset's own, or with `limit` (samples in the whole job) a fixed
    `SpreadSample` of that many; in a distributed job this rank's disjoint share. A stream is
    read in its own order (a limit then takes its first batches)."""
    if isinstance(dataset, IterableDataset):
        if world_size > 1:
            _share_stream(dataset, rank, world_size, "val")
        return None
    limited = limit is not None and limit < len(dataset)  # type: ignore[arg-type]
    if world_size == 1 and not limited:
        return SequentialSampler(dataset)
    order = SpreadSample(dataset, limit) if limited else SequentialOrder(dataset)  # type: ignore[arg-type]
    order.distribute(rank, world_size, pad=False)
    return order


def _share_stream(dataset: Dataset, rank: int, world_size: int, split: str) -> None:
    """A stream keeps only this rank's share (StreamDataset.distribute)."""
    if not isinstance(dataset, StreamDataset):
        raise ValueError(
            f"dataset: {type(dataset).__name__} streams its {split} samples but is not a "
            "engine.api.StreamDataset, so it cannot split them across the "
            f"{world_size} ranks: subclass it and implement distribute(rank, world_size)."
        )
    dataset.distribute(rank, world_size)
