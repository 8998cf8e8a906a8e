"""Images pre-resized by `mode=cache`: uint8 pixels memory-mapped from one file per split."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch.utils.data import Dataset

from src.data.datasets.files import Transform
from src.data.image_cache import open_cache


class CachedImages(Dataset):
    """One split of a cache written by `make cache` (src/modes/cache.py).

    Each sample is a (3, H, W) uint8 view of the mapped file (HWC in memory, which resizes
    fastest), so nothing is decoded and forked workers share the pages through the page cache.
    Random crops and flips apply as on decoded files; `get_filename` names the source image.
    """

    def __init__(
        self,
        root: str,
        split: str,
        transform: Transform | None = None,
        classes: Sequence[str] | None = None,
        check_sources: bool = True,
    ) -> None:
        self.folder = Path(root) / split
        manifest, self.index, self._paths = open_cache(self.folder, check_sources)
        self.classes = list(manifest["classes"])
        if classes is not None and list(classes) != self.classes:
            raise ValueError(
                f"dataset.root: the {split} cache in {self.folder} has classes {self.classes}, "
                f"the train split {list(classes)}: build both splits from one dataset."
            )
        self.class_to_idx = {name: i for i, name in enumerate(self.classes)}
        self.targets = np.ascontiguousarray(self.index[:, 3])
        self.transform = transform
        self._pixels: np.memmap | None = None  # opened on first use, in each process

    def __len__(self) -> int:
        return len(self.index)

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "_pixels": None}  # spawned workers map the file themselves

    def get_filename(self, index: int) -> str:
        """The source image that cache entry `index` was made from."""
        return os.fsdecode(self._paths[index])

    def __getitem__(self, index: int) -> tuple[torch.Tensor, int]:
        if self._pixels is None:  # copy-on-write: writable, the file is never changed
            self._pixels = np.memmap(self.folder / "pixels.u8", dtype=np.uint8, mode="c")
        offset, height, width, label = (int(v) for v in self.index[index])
        flat = self._pixels[offset : offset + height * width * 3]
        image = torch.from_numpy(flat).view(height, width, 3).permute(2, 0, 1)
        if self.transform is not None:
            image = self.transform(image)
        return image, label
