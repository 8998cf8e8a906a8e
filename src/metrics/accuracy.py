"""Top-k accuracy."""

from __future__ import annotations

import torch

from engine.api import Metric, Positive


class Accuracy(Metric):
    """The share of samples whose label is among the `k` top-scoring classes (k=1: argmax)."""

    def __init__(self, k: Positive = 1) -> None:
        if k < 1:
            raise ValueError(f"metrics: Accuracy k={k}: expected an int >= 1.")
        self.k = k

    def sums(self, device: torch.device) -> dict[str, torch.Tensor]:
        return {"correct": torch.zeros((), dtype=torch.long, device=device)}

    def update(
        self, sums: dict[str, torch.Tensor], logits: torch.Tensor, labels: torch.Tensor
    ) -> None:
        if self.k == 1:
            hits = logits.argmax(1) == labels
        else:
            top = logits.topk(min(self.k, logits.shape[1]), dim=1).indices
            hits = (top == labels[:, None]).any(1)
        sums["correct"] += hits.sum()

    def value(self, sums: dict[str, torch.Tensor], samples: int) -> float:
        return sums["correct"].item() / samples
