"""Images pre-resized by `mode=cache`: uint8 pixels (or JPEGs) memory-mapped from one file per
split."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch

from src.data.cache_store import DATA_FILES, data_file, is_jpeg_quality, open_cache
from src.data.datasets.base import MapDataset, Transform
from src.data.decode import decode_jpeg_rgb


class CachedImages(MapDataset):
    """One split of a cache written by `make cache` (src/modes/cache.py).

    Each sample of a raw cache is a (3, H, W) uint8 view of the mapped file (HWC in memory,
    which resizes fastest), so nothing is decoded and forked workers share the pages through the
    page cache; a jpeg cache's entry is decoded from its mapped bytes. Random crops and flips
    apply as on decoded files; `get_filename` names the source image. With `encoding` or
    `jpeg_quality` set, a cache built with other values is refused (StaleCacheError).
    """

    def __init__(
        self,
        root: str,
        split: str,
        transform: Transform | None = None,
        classes: Sequence[str] | None = None,
        check_sources: bool = True,
        encoding: str | None = None,
        jpeg_quality: int | None = None,
    ) -> None:
        if encoding not in (None, *DATA_FILES):
            raise ValueError(
                f"dataset.encoding={encoding!r}: expected null (any) or one of "
                f"{', '.join(DATA_FILES)}."
            )
        if jpeg_quality is not None and not is_jpeg_quality(jpeg_quality):
            raise ValueError(
                f"dataset.jpeg_quality={jpeg_quality!r}: expected null (any) or an "
                "int from 1 to 100."
            )
        self.folder = Path(root) / split
        expected = {"encoding": encoding, "jpeg_quality": jpeg_quality}
        manifest, self.index, self._paths = open_cache(self.folder, check_sources, expected)
        self.encoding = manifest["settings"]["encoding"]
        self._data_file = self.folder / data_file(manifest["settings"])
        self.classes = list(manifest["classes"])
        if classes is not None and list(classes) != self.classes:
            raise ValueError(
                f"dataset.root: the {split} cache in {self.folder} has classes {self.classes}, "
                f"the train split {list(classes)}: build both splits from one dataset."
            )
        self.class_to_idx = {name: i for i, name in enumerate(self.classes)}
        self.targets = np.ascontiguousarray(self.index[:, 4])
        self.transform = transform
        self._data: np.memmap | None = None  # opened on first use, in each process

    def __len__(self) -> int:
        return len(self.index)

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "_data": None}  # spawned workers map the file themselves

    def get_filename(self, index: int) -> str:
        """The source image that cache entry `index` was made from."""
        return os.fsdecode(self._paths[index])

    def __getitem__(self, index: int) -> tuple[torch.Tensor, int]:
        if self._data is None:  # copy-on-write: writable, the file is never changed
            self._data = np.memmap(self._data_file, dtype=np.uint8, mode="c")
        offset, nbytes, height, width, label = (int(v) for v in self.index[index])
        flat = torch.from_numpy(self._data[offset : offset + nbytes])
        if self.encoding == "jpeg":
            image = decode_jpeg_rgb(flat)
        else:
            image = flat.view(height, width, 3).permute(2, 0, 1)
        if self.transform is not None:
            image = self.transform(image)
        return image, label
