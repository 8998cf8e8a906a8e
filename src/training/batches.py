"""Getting a batch onto the device in the form the model expects."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch.utils.data import DataLoader


class BatchMover:
    """Moves a (inputs, labels) batch to the device and normalises the inputs there, once."""

    def __init__(self, device: torch.device, normalize: Callable, channels_last: bool) -> None:
        self.device = device
        self.normalize = normalize
        self.channels_last = channels_last

    def __call__(self, batch: Any) -> tuple[torch.Tensor, torch.Tensor]:
        inputs, labels = batch[0], batch[1]
        inputs = self.normalize(inputs.to(self.device, non_blocking=True))
        if self.channels_last and inputs.ndim == 4:
            inputs = inputs.contiguous(memory_format=torch.channels_last)
        return inputs, labels.to(self.device, non_blocking=True)


def batches_per_epoch(loader: DataLoader, limit: int | None) -> int | None:
    """Batches one pass yields (capped by `limit`); None when the loader has no length."""
    try:
        n = len(loader)
    except TypeError:  # an iterable dataset without __len__
        return limit
    return n if limit is None else min(n, limit)
