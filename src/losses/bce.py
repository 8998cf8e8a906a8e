"""`loss=bce`: the criterion of multi-label data (dataset.multi_label=true)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F

from engine.api import DatasetHooks, class_counts
from src.losses.class_weights import per_class_weights


class BCE(nn.Module):
    """Binary cross-entropy on each class's logit (sigmoid, not softmax: the classes are
    independent), averaged over samples and classes.

    `pos_weight` scales each class's positive term: null (all 1), `balanced` (negatives over
    positives in the train split, per class: a rare label weighs as much as a common one), or
    one number per class.
    """

    multi_label = True  # what the config checks compare with dataset.multi_label

    def __init__(
        self, dataset: DatasetHooks, pos_weight: str | Sequence[float] | None = None
    ) -> None:
        super().__init__()
        if not dataset.multi_label:
            raise ValueError(
                f"loss=bce: {type(dataset).__name__} is single-label (one class per sample); "
                "use loss=cross_entropy, or set dataset.multi_label=true for multi-hot labels."
            )
        self.register_buffer("pos_weight", _pos_weight(pos_weight, dataset), persistent=False)
        self.pos_weight: torch.Tensor | None

    def forward(self, logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        """Mean loss of a batch (`labels`: N x classes multi-hot; logits in float32)."""
        return F.binary_cross_entropy_with_logits(
            logits.float(), labels.float(), pos_weight=self.pos_weight
        )


def _pos_weight(choice: str | Sequence[float] | None, dataset: DatasetHooks) -> torch.Tensor | None:
    """The per-class positive weights `loss.pos_weight` asks for (see BCE)."""

    def balanced(targets: np.ndarray) -> np.ndarray:  # negatives / positives per class
        positives = class_counts(targets, len(dataset.classes))
        absent = [dataset.classes[i] for i in np.flatnonzero(positives == 0)]
        if absent:
            raise ValueError(
                f"loss.pos_weight=balanced: classes {absent} have no positive sample in the "
                "train split, so their weight is infinite; list the weights instead."
            )
        return (len(targets) - positives) / positives

    return per_class_weights(choice, dataset, "loss.pos_weight", balanced)
