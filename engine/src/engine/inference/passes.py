"""One pass of a trained model over a loader of indexed batches (engine/inference/indexed.py), on
the training's device path: uint8 batches moved and normalised on the device, autocast as the
training ran, and, for eval, the loss and metrics summed exactly as validation sums them."""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn
from torch.utils.data import DataLoader
from tqdm import tqdm

from engine.training.batches import BatchMover
from engine.training.device import Precision
from engine.training.loader_failures import loader_failures_named
from engine.training.totals import PassTotals


@dataclass
class Outputs:
    """Every sample's logits (float32, on the CPU), label and dataset index, in pass order."""

    logits: torch.Tensor
    labels: torch.Tensor
    indices: torch.Tensor

    def probabilities(self) -> torch.Tensor:
        """Softmax of the logits: each row sums to 1."""
        return self.logits.softmax(1)


@torch.no_grad()
def run_pass(
    model: nn.Module,
    loader: DataLoader,
    move: BatchMover,
    precision: Precision,
    totals: PassTotals | None = None,
    criterion: nn.Module | None = None,
    desc: str = "",
) -> Outputs:
    """`model` (in eval mode) over every batch of `loader`; with `totals` and `criterion`, each
    batch's loss and metrics are added to `totals` as validation adds them."""
    model.eval()
    logits, labels, indices = [], [], []
    with loader_failures_named(loader.dataset):
        for *batch, index in tqdm(loader, desc=desc, leave=False, disable=None):
            inputs, target, extras = move(batch)
            with precision.autocast():
                out = model(inputs, *extras)
            if totals is not None and criterion is not None:
                totals.add(criterion(out, target), out, target)
            logits.append(out.float().cpu())
            labels.append(target.cpu())
            indices.append(index)
    if not logits:
        raise RuntimeError(f"the {desc or 'input'} loader yielded no samples (all unreadable?).")
    return Outputs(torch.cat(logits), torch.cat(labels), torch.cat(indices))
