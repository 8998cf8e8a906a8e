"""Validation: loss and accuracy over every val sample, counted exactly once."""

from __future__ import annotations

import torch
from torch import nn
from torch.utils.data import DataLoader

from src.training.batches import BatchMover
from src.training.device import Precision
from src.training.meters import ClassificationTotals, LoaderTimer


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
    totals = ClassificationTotals(move.device)
    timer = LoaderTimer()
    for batch in timer.iterate(loader, limit):
        inputs, labels, extras = move(batch)
        with precision.autocast():
            logits = model(inputs, *extras)
        totals.add(nn.functional.cross_entropy(logits.float(), labels), logits, labels)
    timer.stop(totals.samples)
    metrics = totals.means("val", "check the val split and trainer.limit_val_batches.")
    return metrics | {"val/samples_per_s": timer.samples_per_s}
