"""Per-sample weights that make `sampler=weighted` draw every label about equally often."""

from __future__ import annotations

import numpy as np
import torch


def balance_weights(targets: np.ndarray) -> torch.Tensor:
    """Float64 weights, one per sample, from its labels.

    Class ids (N,): 1 / count(its class), so every class is drawn equally often on average.
    Multi-hot (N, C): 1 / count(its rarest label), the label among its own that the fewest
    samples carry, so a rare label is drawn about as often as a common one (a sample with a
    rare and a common label counts as rare: it is the rare label's only source). A sample
    with no label weighs 1 / (number of samples with no label): together they are drawn as
    often as one label.
    """
    if targets.ndim == 1:
        return torch.from_numpy(1.0 / np.bincount(targets)[targets])
    hot = targets > 0
    counts = hot.sum(axis=0)
    rarest = np.where(hot, counts, np.iinfo(np.int64).max).min(axis=1)
    empty = ~hot.any(axis=1)
    rarest[empty] = empty.sum()
    return torch.from_numpy(1.0 / rarest)
