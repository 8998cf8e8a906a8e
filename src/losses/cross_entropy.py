"""The `loss` config group: the criterion every train step, evaluation and benchmark uses."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F

from engine.api import DatasetHooks, Share, class_counts
from src.losses.class_weights import per_class_weights


class CrossEntropy(nn.Module):
    """`loss=cross_entropy`: softmax cross-entropy on float32 logits.

    `label_smoothing` spreads that share of each target over all classes. `class_weights`
    weights each class's samples: null (all 1), `balanced` (1 / the class's count in the train
    split, scaled to mean 1: the weighting alternative to sampler=weighted), or one number per
    class. The val loss uses the same criterion.
    """

    def __init__(
        self,
        dataset: DatasetHooks,
        label_smoothing: Share = 0.0,
        class_weights: str | Sequence[float] | None = None,
    ) -> None:
        super().__init__()
        if not 0.0 <= label_smoothing < 1.0:
            raise ValueError(f"loss.label_smoothing={label_smoothing}: expected 0 <= value < 1.")
        self.label_smoothing = label_smoothing
        weights = _class_weights(class_weights, dataset)
        self.register_buffer("weight", weights, persistent=False)
        self.weight: torch.Tensor | None

    def forward(self, logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        """Mean loss of a batch (logits in float32 whatever the autocast dtype)."""
        return F.cross_entropy(
            logits.float(), labels, weight=self.weight, label_smoothing=self.label_smoothing
        )


def _class_weights(
    choice: str | Sequence[float] | None, dataset: DatasetHooks
) -> torch.Tensor | None:
    """The per-class weights `loss.class_weights` asks for (see CrossEntropy)."""

    def balanced(targets: np.ndarray) -> np.ndarray:  # 1 / count, scaled to mean 1
        counts = class_counts(targets, len(dataset.classes))
        weights = np.where(counts > 0, 1.0 / np.maximum(counts, 1), 0.0)
        return weights / weights[counts > 0].mean()

    return per_class_weights(
        choice, dataset, "loss.class_weights", balanced, "use sampler=weighted or list the weights"
    )
