"""What mode=eval writes about a split of a multi-label model: per-class AP, F1, precision,
recall and support, the split's map / f1 / subset_acc, and the samples with the highest loss.
A confusion matrix (one true class per sample) does not apply, so none is written."""

from __future__ import annotations

import logging
import warnings
from collections.abc import Callable
from pathlib import Path

from torch.nn import functional as F

from engine.core.io import write_csv
from engine.inference.labeller import Labeller
from engine.inference.passes import Outputs

log = logging.getLogger(__name__)

PER_CLASS_COLUMNS = ["class", "AP", "F1", "precision", "recall", "support"]
HARDEST_COLUMNS = ["path", "labels", "predicted", "loss", "scores"]


def per_class(outputs: Outputs, labeller: Labeller) -> list[dict[str, object]]:
    """One row per class over the split: AP (average precision of its scores, threshold-free;
    empty when the class has no positive sample), F1, precision and recall of the labels at
    `labeller.threshold` (precision 0 when nothing is labelled it; recall empty without
    positives) and support (its positive samples)."""
    # imported here: torchmetrics costs 0.8 s of every run's start, and only mode=eval uses it
    from torchmetrics.functional.classification import (
        multilabel_average_precision,
        multilabel_f1_score,
        multilabel_precision,
        multilabel_recall,
    )

    scores, targets = labeller.scores(outputs.logits), outputs.labels.long()
    predicted, count = labeller.predicted(outputs.logits).long(), len(labeller.classes)
    with warnings.catch_warnings():  # a class without positives: its AP is left empty
        warnings.filterwarnings("ignore", "No positive samples found", UserWarning)
        ap = multilabel_average_precision(scores, targets, num_labels=count, average=None)
    scored = {
        "F1": multilabel_f1_score(predicted, targets, num_labels=count, average=None),
        "precision": multilabel_precision(predicted, targets, num_labels=count, average=None),
        "recall": multilabel_recall(predicted, targets, num_labels=count, average=None),
    }
    rows = []
    for k, (name, support) in enumerate(
        zip(labeller.classes, targets.sum(0).tolist(), strict=True)
    ):
        row: dict[str, object] = {"class": name, "support": int(support)}
        row |= {key: float(values[k]) for key, values in scored.items()}
        row["AP"] = float(ap[k]) if support else None
        row["recall"] = row["recall"] if support else None
        rows.append(row)
    return rows


def summary(outputs: Outputs, labeller: Labeller, split: str) -> dict[str, float]:
    """`<split>/map` (macro average precision), `<split>/f1` (macro F1 at the threshold) and
    `<split>/subset_acc` (share of samples whose labels are exactly right), over the split."""
    from torchmetrics.functional.classification import (  # see per_class
        multilabel_average_precision,
        multilabel_f1_score,
    )

    scores, targets = labeller.scores(outputs.logits), outputs.labels.long()
    predicted, count = labeller.predicted(outputs.logits).long(), len(labeller.classes)
    absent = [
        name for name, n in zip(labeller.classes, targets.sum(0).tolist(), strict=True) if not n
    ]
    if absent:  # said once here, in the engine's words, instead of torchmetrics' warning
        log.warning(
            "%s: %d class(es) have no positive sample (%s): each counts as AP 0 in %s/map, as "
            "torchmetrics and scikit-learn average it; per_class.csv leaves their AP empty",
            split,
            len(absent),
            ", ".join(absent[:5]) + (", ..." if len(absent) > 5 else ""),
            split,
        )
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", "No positive samples found", UserWarning)
        mean_ap = float(multilabel_average_precision(scores, targets, num_labels=count))
    return {
        f"{split}/map": mean_ap,
        f"{split}/f1": float(multilabel_f1_score(predicted, targets, num_labels=count)),
        f"{split}/subset_acc": float((predicted == targets).all(1).double().mean()),
    }


def hardest(
    outputs: Outputs, labeller: Labeller, path_of: Callable[[int], str], count: int
) -> list[dict[str, object]]:
    """The `count` samples with the highest loss (binary cross-entropy of their multi-hot
    labels, meaned over the classes as loss=bce means it), worst first: path, true labels and
    predicted labels (`a|b`, '' for none), the loss, and every class's score (`name:score|...`);
    `index` (the dataset's, not a CSV column) finds the sample again."""
    targets = outputs.labels.float()
    losses = F.binary_cross_entropy_with_logits(outputs.logits, targets, reduction="none").mean(1)
    names, scores = labeller.decode(outputs.logits)
    rows = []
    for i in losses.argsort(descending=True, stable=True)[:count].tolist():
        true = [labeller.classes[k] for k in targets[i].nonzero().flatten().tolist()]
        rows.append(
            {
                "path": path_of(int(outputs.indices[i])),
                "labels": labeller.joined(true),
                "predicted": labeller.joined(names[i]),
                "loss": float(losses[i]),
                "scores": labeller.joined_scores(scores[i]),
                "index": int(outputs.indices[i]),
            }
        )
    return rows


def write_reports(out: Path, rows: list[dict[str, object]], worst: list[dict[str, object]]) -> None:
    """per_class.csv and hardest.csv."""
    write_csv(out / "per_class.csv", PER_CLASS_COLUMNS, rows)
    write_csv(out / "hardest.csv", HARDEST_COLUMNS, worst)
