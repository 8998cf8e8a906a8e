"""Validation: loss and accuracy over every val sample, counted exactly once."""

from __future__ import annotations

import torch
from torch import nn
from torch.utils.data import DataLoader

from src.training.batches import BatchMover
from src.training.device import Precision
from src.training.meters import LoaderTimer


@torch.no_grad()
def evaluate(
    model: nn.Module,
    loader: DataLoader,
    move: BatchMover,
    precision: Precision,
    limit: int | None = None,
) -> dict[str, float]:
    """Mean loss and accuracy over every sample of `loader` (or its first `limit` batches)."""
    model.eval()
    loss_sum = torch.zeros((), device=move.device)
    correct = torch.zeros((), device=move.device, dtype=torch.long)
    seen = 0
    timer = LoaderTimer()
    for batch in timer.iterate(loader, limit):
        inputs, labels = move(batch)
        with precision.autocast():
            logits = model(inputs)
        loss_sum += nn.functional.cross_entropy(logits.float(), labels, reduction="sum")
        correct += (logits.argmax(1) == labels).sum()
        seen += len(labels)
    timer.stop(seen)
    if seen == 0:
        raise RuntimeError("the val loader yielded no samples; check the val split and limits.")
    return {
        "val/loss": loss_sum.item() / seen,
        "val/acc": correct.item() / seen,
        "val/samples_per_s": timer.samples_per_s,
    }
