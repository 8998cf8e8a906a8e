"""What a split's `targets` say about its classes, for single-label (one class index per
sample) and multi-label (a multi-hot row per sample) data alike: written once, read by the
losses' balanced weights, the weighted sampler, the k-fold cut and the run's class counts."""

from __future__ import annotations

import numpy as np

LABEL_SEPARATOR = "|"  # joins a multi-label sample's classes wherever people read them


def is_multi_hot(targets: np.ndarray) -> bool:
    """A multi-label split's targets: one 0/1 row per sample."""
    return np.asarray(targets).ndim == 2


def class_counts(targets: np.ndarray, num_classes: int) -> np.ndarray:
    """Samples per class (multi-label: the samples carrying each class), int64."""
    targets = np.asarray(targets)
    if is_multi_hot(targets):
        return targets.astype(bool).sum(axis=0).astype(np.int64)
    return np.bincount(targets.astype(np.int64), minlength=num_classes)


def rarest_labels(targets: np.ndarray) -> np.ndarray:
    """Each sample's stratum: its class (single-label), or the rarest of its classes, the one
    fewest samples of the split carry (multi-label; ties: the lower index). A sample with no
    class is -1, a stratum of its own."""
    targets = np.asarray(targets)
    if not is_multi_hot(targets):
        return targets.astype(np.int64)
    present = targets.astype(bool)
    counts = present.sum(axis=0)
    # a class a sample lacks ranks past every count, so argmin picks among its own classes
    ranked = np.where(present, counts[None, :], np.iinfo(np.int64).max)
    rarest = ranked.argmin(axis=1).astype(np.int64)
    rarest[~present.any(axis=1)] = -1
    return rarest


def label_text(target: int | np.ndarray | list, classes: list[str]) -> str:
    """A sample's label as people read it: its class name, or its classes joined by `|`
    (a multi-hot row; empty for none)."""
    if np.ndim(target) == 0:
        return classes[int(target)]  # type: ignore[arg-type]
    return LABEL_SEPARATOR.join(classes[i] for i in np.flatnonzero(np.asarray(target)))


def refuse_multi_label(dataset: object, what: str) -> None:
    """Stop `what` (e.g. "mode=cache"), which stores one class index per sample, on
    multi-label data, before any work, instead of writing wrong labels."""
    if getattr(dataset, "multi_label", False):
        raise ValueError(
            f"{what} stores one class index per image, but this data is multi-label "
            "(dataset.multi_label=true): train from the listing itself (dataset=csv)."
        )
