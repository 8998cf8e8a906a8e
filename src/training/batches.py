"""Getting a batch onto the device in the form the model expects."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import torch
from torch.utils.data import DataLoader


class DeviceBatch(NamedTuple):
    """A batch on the device: model inputs, labels, and any extra model arguments."""

    inputs: torch.Tensor
    labels: torch.Tensor
    extras: tuple[torch.Tensor, ...]  # e.g. lengths and mask from collate=pad


class BatchMover:
    """Moves a (inputs, labels, *extras) batch to the device; normalises the inputs there, once.

    Extras (such as sequence lengths and masks) follow the inputs into `model(inputs, *extras)`.
    """

    def __init__(self, device: torch.device, normalize: Callable, channels_last: bool) -> None:
        self.device = device
        self.normalize = normalize
        self.channels_last = channels_last

    def __call__(self, batch: Any) -> DeviceBatch:
        inputs, labels, *extras = batch
        layout = torch.channels_last if self.channels_last else torch.contiguous_format
        inputs = self.normalize(inputs.to(self.device, non_blocking=True), layout)
        if self.channels_last and inputs.ndim == 4:  # a no-op when the normaliser wrote NHWC
            inputs = inputs.contiguous(memory_format=layout)
        return DeviceBatch(
            inputs,
            labels.to(self.device, non_blocking=True),
            tuple(e.to(self.device, non_blocking=True) for e in extras),
        )


def batches_per_epoch(loader: DataLoader, limit: int | None) -> int | None:
    """Batches one pass yields (capped by `limit`); None when the loader has no length."""
    try:
        n = len(loader)
    except TypeError:  # an iterable dataset without __len__
        return limit
    return n if limit is None else min(n, limit)
