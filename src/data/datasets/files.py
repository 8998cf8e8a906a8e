"""Map-style dataset over labelled image files, stored as compact arrays."""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence

import numpy as np
import torch
from torch.utils.data import Dataset

from src.data.decode import load_sample

Transform = Callable[[torch.Tensor], torch.Tensor]


class LabelledImageFiles(Dataset):
    """Images listed by path with integer targets.

    Paths live in one fixed-width bytes array and targets in one int64 array, so forked
    workers share them without copy-on-read growth (no per-sample Python objects).
    """

    def __init__(
        self,
        paths: Sequence[str],
        targets: Sequence[int] | np.ndarray,
        classes: Sequence[str],
        transform: Transform | None = None,
    ) -> None:
        self._paths = np.array([os.fsencode(p) for p in paths], dtype=np.bytes_)
        self.targets = np.asarray(targets, dtype=np.int64)
        self.classes = list(classes)
        self.class_to_idx = {name: i for i, name in enumerate(self.classes)}
        self.transform = transform

    def __len__(self) -> int:
        return len(self.targets)

    def get_filename(self, index: int) -> str:
        """The file behind sample `index` (to trace a bad batch back to its images)."""
        return os.fsdecode(self._paths[index])

    def __getitem__(self, index: int) -> tuple[torch.Tensor, int]:
        label = int(self.targets[index])
        image = load_sample(self.get_filename(index), index, self.classes[label])
        if self.transform is not None:
            image = self.transform(image)
        return image, label
