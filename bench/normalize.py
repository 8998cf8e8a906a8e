"""Why the CPU normaliser recycles its output buffers (engine/src/engine/data/buffers.py): the same
per-batch arithmetic into pooled buffers and into a fresh tensor per batch, interleaved.

A fresh float batch of 64 x 3 x 224 x 224 (38.5 MB) is new pages from the kernel every time
(above glibc's mmap threshold); writing them costs more than the arithmetic. The pool needs
to know when no tensor shares a buffer's storage any more, which only torch's private
storage use count tells, so it is kept only because this measurement says it matters.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable

import torch

from engine.data.transforms import Normalizer

SHAPES = ((64, 3, 224, 224), (256, 3, 32, 32))  # an ImageNet-size batch; CIFAR-size
MEAN, STD = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)
BATCHES = 20  # timed per round, after 3 untimed


def fresh(mean: torch.Tensor, std: torch.Tensor) -> Callable[[torch.Tensor], torch.Tensor]:
    """The normaliser's arithmetic, into a tensor allocated for every batch."""
    scale, shift = (1.0 / (std * 255.0)).view(1, -1, 1, 1), (mean / std).view(1, -1, 1, 1)
    return lambda x: torch.empty(x.shape, dtype=torch.float32).copy_(x).mul_(scale).sub_(shift)


def ms_per_batch(normalise: Callable[[torch.Tensor], torch.Tensor], batch: torch.Tensor) -> float:
    """Median milliseconds of `normalise(batch)`, each result read once (as a model would)."""
    times = []
    for i in range(3 + BATCHES):
        start = time.perf_counter()
        out = normalise(batch)
        out.view(-1)[::1024].sum()
        if i >= 3:
            times.append(time.perf_counter() - start)
        del out
    return 1000 * statistics.median(times)


def normalize_rows(repeats: int) -> list[tuple[str, list[float]]]:
    """Per shape: ms per batch pooled, fresh, and their ratio, one value per round."""
    rows = []
    mean, std = torch.tensor(MEAN), torch.tensor(STD)
    for shape in SHAPES:
        batch = torch.randint(0, 256, shape, dtype=torch.uint8)
        pooled, allocated = [], []
        for _ in range(repeats):
            pooled.append(ms_per_batch(Normalizer(MEAN, STD), batch))
            allocated.append(ms_per_batch(fresh(mean, std), batch))
        name = "x".join(map(str, shape))
        rows += [
            (f"{name} uint8 -> float, pooled buffers, ms / batch", pooled),
            (f"{name} uint8 -> float, fresh tensor per batch, ms / batch", allocated),
            (f"{name} fresh / pooled", [f / p for f, p in zip(allocated, pooled, strict=True)]),
        ]
    return rows
