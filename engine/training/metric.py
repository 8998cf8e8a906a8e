"""What a metric is: sums kept over a pass, updated per batch, turned into one number.

The sums are tensors on the device (no host sync per batch); under torchrun the ranks' sums are
added before `value`, so a metric is exact for the whole split. A metric named `name` in the
`metrics` group is logged as `train/<name>` and `val/<name>`.
"""

from __future__ import annotations

from abc import ABC, abstractmethod

import torch


class Metric(ABC):
    """A measure of predictions that sums over the batches of a pass."""

    @abstractmethod
    def sums(self, device: torch.device) -> dict[str, torch.Tensor]:
        """The zero sums a pass starts from (float or int tensors on `device`)."""

    @abstractmethod
    def update(
        self, sums: dict[str, torch.Tensor], logits: torch.Tensor, labels: torch.Tensor
    ) -> None:
        """Add one batch (`logits` N x classes, `labels` N) to `sums`, in place."""

    @abstractmethod
    def value(self, sums: dict[str, torch.Tensor], samples: int) -> float:
        """The metric over the pass, from its `sums` and the pass's sample count."""
