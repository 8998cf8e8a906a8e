"""One weight per class, as a loss's YAML key gives it (`loss.class_weights`,
`loss.pos_weight`): null, `balanced` (counted from the train split by the loss's own rule) or
a list of one number per class. Read once here for every loss."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import torch

from engine.api import DatasetHooks


def per_class_weights(
    choice: str | Sequence[float] | None,
    dataset: DatasetHooks,
    key: str,
    balanced: Callable[[np.ndarray], np.ndarray],
    without_targets: str = "list the weights",
) -> torch.Tensor | None:
    """The float32 weights `key` (e.g. loss.pos_weight) asks for: None for null, `balanced`
    (the train split's `targets`) for balanced, else the listed numbers, each checked;
    `without_targets`: the fix when the dataset has no targets."""
    classes = len(dataset.classes)
    if choice is None:
        return None
    if choice == "balanced":
        if dataset.targets is None:
            raise ValueError(
                f"{key}=balanced needs per-sample labels, but {type(dataset).__name__} has no "
                f"targets; {without_targets} ({key}=[w0, w1, ...])."
            )
        return torch.tensor(balanced(np.asarray(dataset.targets)), dtype=torch.float32)
    if isinstance(choice, str) or len(choice) != classes or min(choice) < 0:
        raise ValueError(
            f"{key}={choice!r}: expected null, balanced or {classes} numbers >= 0 "
            f"(one per class: {dataset.classes})."
        )
    return torch.tensor([float(w) for w in choice], dtype=torch.float32)
