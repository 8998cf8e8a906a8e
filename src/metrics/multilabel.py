"""Metrics of multi-label data (dataset.multi_label=true): each class is a yes/no decision on
sigmoid(logit). torchmetrics computes them, on every sample of the pass at once (the engine
gathers the rows from every rank: exact under DDP)."""

from __future__ import annotations

import torch
from torchmetrics.functional.classification import (
    multilabel_average_precision,
    multilabel_exact_match,
    multilabel_f1_score,
)

from engine.api import Fraction, GatheredMetric


class MeanAveragePrecision(GatheredMetric):
    """Macro average precision: each class's area under its precision-recall curve over the
    ranked scores, averaged over the classes (threshold-free). A class without a positive
    sample in the pass counts 0 (torchmetrics' rule, with its warning): a val split should
    hold every class."""

    multi_label = True

    def value(self, logits: torch.Tensor, labels: torch.Tensor) -> float:
        return multilabel_average_precision(
            logits.sigmoid(), labels.int(), num_labels=logits.shape[1], average="macro"
        ).item()


class F1(GatheredMetric):
    """Macro F1: each class's F1 with its label predicted when its score is above `threshold`,
    averaged over the classes (a class never predicted nor present counts 0)."""

    multi_label = True

    def __init__(self, threshold: Fraction = 0.5) -> None:
        self.threshold = threshold

    def value(self, logits: torch.Tensor, labels: torch.Tensor) -> float:
        return multilabel_f1_score(
            logits.sigmoid(),
            labels.int(),
            num_labels=logits.shape[1],
            threshold=self.threshold,
            average="macro",
        ).item()


class SubsetAccuracy(GatheredMetric):
    """The share of samples whose every class is decided right at `threshold` (exact match)."""

    multi_label = True

    def __init__(self, threshold: Fraction = 0.5) -> None:
        self.threshold = threshold

    def value(self, logits: torch.Tensor, labels: torch.Tensor) -> float:
        return multilabel_exact_match(
            logits.sigmoid(), labels.int(), num_labels=logits.shape[1], threshold=self.threshold
        ).item()
