"""What mode=eval writes about a split: the confusion matrix, per-class precision / recall / F1,
and the samples with the highest loss (where mislabelled files show up), each as a CSV."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import torch
from torch.nn import functional as F

from engine.core.io import write_csv
from engine.inference.passes import Outputs

PER_CLASS_COLUMNS = ["class", "support", "precision", "recall", "f1"]
HARDEST_COLUMNS = ["path", "label", "predicted", "score", "loss"]


def confusion_matrix(outputs: Outputs, num_classes: int) -> torch.Tensor:
    """Counts[true class, predicted class] (int64, K x K)."""
    pairs = outputs.labels * num_classes + outputs.logits.argmax(1)
    return torch.bincount(pairs, minlength=num_classes**2).reshape(num_classes, num_classes)


def per_class(confusion: torch.Tensor, classes: list[str]) -> list[dict[str, object]]:
    """One row per class: support (its samples), precision (of the samples predicted as it, the
    share that are it; 0 when none is), recall (of its samples, the share predicted as it; empty
    when it has no samples) and F1 (their harmonic mean; 0 when both are 0)."""
    rows = []
    for k, name in enumerate(classes):
        support, predicted, hits = (
            int(confusion[k].sum()),
            int(confusion[:, k].sum()),
            int(confusion[k, k]),
        )
        precision = hits / predicted if predicted else 0.0
        recall = hits / support if support else None
        f1 = 2 * precision * recall / (precision + recall) if recall and precision else 0.0
        rows.append(
            {"class": name, "support": support, "precision": precision, "recall": recall, "f1": f1}
        )
    return rows


def mean_recall(rows: list[dict[str, object]]) -> float:
    """The mean of the per-class recalls (`acc_per_class`), over classes with samples."""
    recalls = [float(r["recall"]) for r in rows if r["recall"] is not None]  # type: ignore[arg-type]
    return sum(recalls) / len(recalls)


def hardest(
    outputs: Outputs, classes: list[str], path_of: Callable[[int], str], count: int
) -> list[dict[str, object]]:
    """The `count` samples with the highest loss (cross-entropy of their label, -log p), worst
    first: path, label, predicted class, its probability (score) and the loss; `index` (the
    dataset's, not a CSV column) finds the sample again."""
    losses = F.cross_entropy(outputs.logits, outputs.labels, reduction="none")
    scores, predicted = outputs.probabilities().max(1)
    rows = []
    for i in losses.argsort(descending=True, stable=True)[:count].tolist():
        rows.append(
            {
                "path": path_of(int(outputs.indices[i])),
                "label": classes[int(outputs.labels[i])],
                "predicted": classes[int(predicted[i])],
                "score": float(scores[i]),
                "loss": float(losses[i]),
                "index": int(outputs.indices[i]),
            }
        )
    return rows


def write_reports(
    out: Path,
    confusion: torch.Tensor,
    rows: list[dict[str, object]],
    worst: list[dict[str, object]],
) -> None:
    """per_class.csv, confusion.csv (rows: true class, columns: predicted) and hardest.csv."""
    classes = [str(r["class"]) for r in rows]
    write_csv(out / "per_class.csv", PER_CLASS_COLUMNS, rows)
    matrix = [
        {"true \\ predicted": name} | dict(zip(classes, map(int, counts), strict=True))
        for name, counts in zip(classes, confusion.tolist(), strict=True)
    ]
    write_csv(out / "confusion.csv", ["true \\ predicted", *classes], matrix)
    write_csv(out / "hardest.csv", HARDEST_COLUMNS, worst)
