"""Images pre-resized by `mode=cache`: uint8 pixels (or JPEGs) memory-mapped from one file per
split."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch

from engine.data.bad_samples import BadSample
from engine.data.cache_store import DATA_FILES, data_file, is_jpeg_quality, open_cache
from engine.data.datasets.base import DecodedSamples, MapDataset, Transform
from engine.data.decode import SampleError, decode_jpeg_rgb, describe_error
from engine.data.decode_policy import DecodePolicy
from engine.data.image_header import (
    JPEG_MAGIC,
    check_pixels,
    check_scans,
    jpeg_size,
)


def check_entry(data: np.ndarray, nbytes: int, height: int, width: int, jpeg: bool) -> None:
    """Raise `ValueError` when a cache entry's bytes do not hold the image its index row
    records (`nbytes` bytes of `height` x `width` pixels): cut short, another size, or (jpeg)
    a header that declares another size, read before anything is decoded."""
    if nbytes == 0:
        raise ValueError("the entry is empty (0 bytes)")
    if len(data) != nbytes:
        raise ValueError(
            f"the index records {nbytes:,} bytes for it, the data file holds {len(data):,} there"
        )
    if not jpeg:
        if nbytes != height * width * 3:
            raise ValueError(f"{nbytes:,} bytes are not the {height}x{width} RGB pixels indexed")
        return
    if bytes(data[:2]) != JPEG_MAGIC:
        raise ValueError(f"not a JPEG (first bytes {bytes(data[:8])!r})")
    declared = jpeg_size(memoryview(data))
    if declared != (width, height):
        raise ValueError(
            f"its JPEG header declares {declared[0]}x{declared[1]} pixels, the index records "
            f"the {width}x{height} it was cached at"
        )


class CachedImages(DecodedSamples, MapDataset):
    """One split of a cache written by `make cache` (engine/modes/cache.py).

    Each sample of a raw cache is a (3, H, W) uint8 view of the mapped file (HWC in memory,
    which resizes fastest), so nothing is decoded and forked workers share the pages through the
    page cache; a jpeg cache's entry is decoded from its mapped bytes, once its header declares
    the size its index row records, within `max_image_pixels`, in at most `max_jpeg_scans`
    scans. Random crops and flips apply as on decoded files; `get_filename` names the source
    image. A damaged entry is a `SampleError` naming it, or with `on_error="skip"` a
    `BadSample`. With `encoding` or `jpeg_quality` set, a cache built with other values is
    refused (StaleCacheError).
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
        decode: DecodePolicy | None = None,
    ) -> None:
        decode = (decode or DecodePolicy()).only_in_workers("cache")
        self.on_error, self.max_bad_fraction = decode.on_error, decode.max_bad_fraction
        self.max_image_pixels, self.max_jpeg_scans = decode.max_image_pixels, decode.max_jpeg_scans
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

    def label_name(self, index: int) -> str:
        return self.classes[int(self.targets[index])]

    def _entry(self, index: int) -> torch.Tensor:
        """Entry `index` as a (3, H, W) uint8 image; a `SampleError` naming the entry, its source
        and the fix if its bytes are damaged."""
        try:
            if self._data is None:  # copy-on-write: writable, the file is never changed
                self._data = np.memmap(self._data_file, dtype=np.uint8, mode="c")
            offset, nbytes, height, width, _ = (int(v) for v in self.index[index])
            data = self._data[offset : offset + nbytes]
            check_entry(data, nbytes, height, width, self.encoding == "jpeg")
            if self.encoding != "jpeg":
                return torch.from_numpy(data).view(height, width, 3).permute(2, 0, 1)
            check_pixels(width, height, self.max_image_pixels)
            check_scans(bytes(data), self.max_jpeg_scans)
            return decode_jpeg_rgb(torch.from_numpy(data))
        except Exception as err:  # re-raised naming the entry, its source and the fix
            raise SampleError(
                f"cannot decode cache entry {index} (class {self.label_name(index)!r}) of "
                f"{self._data_file}, cached from {self.get_filename(index)}: "
                f"{describe_error(err)}. Rebuild the cache: python train.py mode=cache "
                f"cache.dir={self.folder.parent} cache.rebuild=true (with the dataset and cache "
                "settings it was built from), or set dataset.decode.on_error=skip to leave "
                "damaged entries out (listed in bad_samples.csv)."
            ) from err

    def __getitem__(self, index: int) -> tuple[torch.Tensor, int] | BadSample:
        label = int(self.targets[index])
        try:
            image = self._entry(index)
        except SampleError as err:
            reason = describe_error(err.__cause__ or err)
            where = f"cache entry {index} of {self._data_file}: {reason}"
            return self._skip_or_raise(index, err, reason=where)
        if self.transform is not None:
            image = self.transform(image)
        return image, label
