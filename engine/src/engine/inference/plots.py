"""Pictures of an evaluation: the confusion matrix, and the hardest samples as a labelled grid."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import torch

from engine.core.grid import labelled_grid

if TYPE_CHECKING:
    from matplotlib.figure import Figure

GRID_SAMPLES = 64  # hardest samples drawn at most


def confusion_figure(confusion: torch.Tensor, classes: list[str], title: str) -> Figure:
    """The matrix as a heat map coloured by row share (each true class's recall on the
    diagonal), every cell with its count; rows: true class, columns: predicted class."""
    from matplotlib.figure import Figure  # here: matplotlib costs 0.35 s of every run's start

    k = len(classes)
    shares = confusion.double() / confusion.sum(1, keepdim=True).clamp(min=1)
    side = min(3 + 0.6 * k, 14)
    figure = Figure(figsize=(side + 1.5, side), layout="constrained")
    axes = figure.add_subplot()
    image = axes.imshow(shares.numpy(), cmap="Blues", vmin=0.0, vmax=1.0)
    figure.colorbar(image, ax=axes, label="share of the true class")
    axes.set(xticks=range(k), yticks=range(k), xlabel="predicted", ylabel="true", title=title)
    axes.set_xticklabels(classes, rotation=45, ha="right")
    axes.set_yticklabels(classes)
    if k <= 30:  # counts stay legible
        for (row, col), count in zip(
            ((r, c) for r in range(k) for c in range(k)), confusion.flatten().tolist(), strict=True
        ):
            colour = "white" if shares[row, col] > 0.5 else "black"
            axes.text(col, row, str(count), ha="center", va="center", color=colour, fontsize=8)
    return figure


def class_caption(row: dict[str, object]) -> str:
    """A single-label tile's caption: its true class, predicted class and that one's score."""
    return f"true {row['label']}\npred {row['predicted']} {float(row['score']):.2f}"  # type: ignore[arg-type]


def labels_caption(row: dict[str, object]) -> str:
    """A multi-label tile's caption: its true and predicted labels (`-` for none)."""
    return f"true {row['labels'] or '-'}\npred {row['predicted'] or '-'}"


def hardest_grid(
    rows: list[dict[str, object]],
    image_of: Callable[[int], torch.Tensor],
    caption: Callable[[dict[str, object]], str] = class_caption,
) -> torch.Tensor | None:
    """The first `GRID_SAMPLES` hardest `rows` (engine/inference/reports.py; `image_of(index)`
    reads a sample's input) as one grid, each tile over its `caption` (true and predicted
    classes); None unless the inputs are images of one size (C x H x W, C 1 or 3, uint8 as the
    val transforms leave them)."""
    shown = rows[:GRID_SAMPLES]
    images = [image_of(int(r["index"])) for r in shown]  # type: ignore[call-overload]
    if not images or any(x.ndim != 3 or x.shape[0] not in (1, 3) for x in images):
        return None
    if any(x.shape != images[0].shape for x in images):
        return None
    batch = torch.stack(images).float()
    batch = batch / 255 if images[0].dtype == torch.uint8 else batch.clamp(0, 1)
    return labelled_grid(batch, [caption(r) for r in shown])
