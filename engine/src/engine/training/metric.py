"""What a metric is: sums kept over a pass, updated per batch, turned into one number; or,
for a measure that ranks every sample at once (average precision), the pass's rows.

The sums are tensors on the device (no host sync per batch); under torchrun the ranks' sums are
added before `value`, so a metric is exact for the whole split. A `GatheredMetric` sees the
logits and labels of every sample of the pass, gathered from every rank, exact alike. A metric
named `name` in the `metrics` group is logged as `train/<name>` and `val/<name>`.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping
from typing import Any, ClassVar

import torch
from hydra.utils import instantiate

from engine.metric_keys import metric_names


class Metric(ABC):
    """A measure of predictions that sums over the batches of a pass."""

    # measures multi-hot labels (N x classes: dataset.multi_label), not class indices
    multi_label: ClassVar[bool] = False

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


class GatheredMetric(ABC):
    """A measure that needs every sample's scores at once (average precision ranks them all).

    The pass keeps each sample's logits and labels (float32 N x classes: one copy shared by
    every gathered metric, on the device), gathered from every rank before `value`. It costs
    that memory: a train pass holds its epoch's rows.
    """

    multi_label: ClassVar[bool] = False

    @abstractmethod
    def value(self, logits: torch.Tensor, labels: torch.Tensor) -> float:
        """The metric over the pass's every sample (`logits` N x classes, `labels` N or
        N x classes)."""


AnyMetric = Metric | GatheredMetric


def build_metrics(node: Mapping[str, Any]) -> dict[str, AnyMetric]:
    """The `metrics` group's metrics by name: its entries with a `_target_` (a plain key such
    as metrics.threshold is a setting they share by interpolation)."""
    return {name: instantiate(node[name]) for name in metric_names(node)}
