"""Per-sample weights that make `sampler=weighted` draw every label about equally often."""

from __future__ import annotations

import numpy as np
import torch

from engine.data.targets import class_counts, is_multi_hot, rarest_labels


def balance_weights(targets: np.ndarray) -> torch.Tensor:
    """Float64 weights, one per sample, from its labels.

    Class ids (N,): 1 / count(its class), so every class is drawn equally often on average.
    Multi-hot (N, C): 1 / count(its rarest label), the label among its own that the fewest
    samples carry, so a rare label is drawn about as often as a common one (a sample with a
    rare and a common label counts as rare: it is the rare label's only source). A sample
    with no label weighs 1 / (number of samples with no label): together they are drawn as
    often as one label.
    """
    if not is_multi_hot(targets):
        return torch.from_numpy(1.0 / np.bincount(targets)[targets])
    rarest = rarest_labels(targets)
    empty = rarest < 0
    counts = class_counts(targets, targets.shape[1])[np.where(empty, 0, rarest)]
    counts[empty] = empty.sum()
    return torch.from_numpy(1.0 / counts)
