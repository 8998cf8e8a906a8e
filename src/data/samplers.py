"""Train-order samplers for the `sampler` config group (each takes the train dataset)."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import torch
from torch.utils.data import (
    Dataset,
    RandomSampler,
    Sampler,
    SequentialSampler,
    WeightedRandomSampler,
)


def random_sampler(dataset: Dataset) -> RandomSampler:
    """Uniform random order without replacement, reshuffled every epoch."""
    return RandomSampler(dataset)  # type: ignore[arg-type]


def sequential_sampler(dataset: Dataset) -> SequentialSampler:
    """The dataset's own order, every epoch."""
    return SequentialSampler(dataset)  # type: ignore[arg-type]


class FixedOrderSampler(Sampler[int]):
    """One random order drawn from `seed`, repeated identically every epoch."""

    def __init__(self, size: int, seed: int) -> None:
        self.order = torch.randperm(size, generator=torch.Generator().manual_seed(seed)).tolist()

    def __iter__(self) -> Iterator[int]:
        return iter(self.order)

    def __len__(self) -> int:
        return len(self.order)


def fixed_order_sampler(dataset: Dataset, seed: int) -> FixedOrderSampler:
    """A shuffled order that never changes (debug=overfit: the same mixed batch every epoch)."""
    return FixedOrderSampler(len(dataset), seed)  # type: ignore[arg-type]


def class_balance_weights(targets: np.ndarray, num_classes: int) -> torch.Tensor:
    """Per-sample weights 1 / count(class): every class is drawn equally often on average."""
    counts = np.bincount(targets, minlength=num_classes)
    return torch.from_numpy(1.0 / counts[targets])


def weighted_sampler(
    dataset: Dataset, replacement: bool = True, num_samples: int | None = None
) -> WeightedRandomSampler:
    """Class-balancing WeightedRandomSampler; `num_samples` defaults to len(dataset)."""
    targets = getattr(dataset, "targets", None)
    if targets is None:
        raise ValueError(
            f"sampler=weighted needs per-sample labels, but {type(dataset).__name__} has no "
            "`targets`; use sampler=random or add a `targets` array to the dataset."
        )
    targets = np.asarray(targets, dtype=np.int64)
    weights = class_balance_weights(targets, len(dataset.classes))  # type: ignore[attr-defined]
    n = len(targets) if num_samples is None else num_samples
    if not replacement and n > len(targets):
        raise ValueError(
            f"sampler.num_samples={n} exceeds the {len(targets)} samples, which "
            "sampler.replacement=false cannot draw; lower it or set replacement=true."
        )
    return WeightedRandomSampler(weights, num_samples=n, replacement=replacement)
