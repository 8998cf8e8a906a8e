"""`dataset=parquet`: images in Parquet files, as the Hugging Face Hub publishes datasets,
read where they are (a folder or any fsspec URL), with no conversion first.

Samples are indexed (a map-style dataset), so every order, mid-epoch and elastic resume,
`dataset=mix`, k-fold, `trainer.record_samples` and the weighted sampler work as on the other
kinds. The files are read by row group, the unit Parquet stores and compresses together: the
train order (sampler=random) permutes the row groups and shuffles rows within a window of
`shuffle_window` samples (`blocks` below, engine/data/samplers.py), so each loader worker
reads a row group once per pass and keeps the few a window spans. The labels are read at
start-up (one column); the image bytes only by the workers, a row group at a time.
"""

from __future__ import annotations

import http.client
import logging
import math
import os
import urllib.error
from collections import OrderedDict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import torch

from engine.core.bounds import Bytes, Count, Positive, Seconds, Timeout
from engine.core.text import shown
from engine.data.bad_samples import BadSample
from engine.data.datasets.base import DecodedSamples, MapDataset, Transform
from engine.data.decode import SampleError, decode_image_bytes, describe_error
from engine.data.decode_policy import DecodePolicy
from engine.data.encoded import Encoded, encode_sample
from engine.data.listing import unique_classes
from engine.data.parquet.files import Folder, Layout, ParquetFileError, read_layout, split_files
from engine.data.parquet.labels import SplitLabels
from engine.data.safe_read import max_file_bytes, read_regular_file
from engine.data.shards import ShardError
from engine.data.shards.remote import Network
from engine.data.shards.writer import unfinished_write
from engine.data.targets import label_text
from engine.data.transforms import decode_min_side
from engine.measure.stages import SUMS

log = logging.getLogger(__name__)
# what a remote read fails with (an image that does not decode is an OSError too: PIL's)
NETWORK = (ConnectionError, TimeoutError, http.client.HTTPException, urllib.error.URLError)

MAX_ROW_GROUP_BYTES = 2**30  # the default of dataset.max_row_group_bytes
OPEN_FILES = 16  # files a worker keeps open (a split may have thousands)


class ParquetDataset(DecodedSamples, MapDataset):
    """One split of an image dataset stored in Parquet files (engine/data/parquet/)."""

    files_checkable = True
    splits = ("train", "val", "test")
    multi_label = None  # type: ignore[assignment]  # until built: the label column's type decides

    def __init__(
        self,
        split: str,
        root: str,
        train_files: str | Sequence[str] | None = None,
        val_files: str | Sequence[str] | None = None,
        test_files: str | Sequence[str] | None = None,
        image_column: str = "image",
        label_column: str = "label",
        transform: Transform | None = None,
        classes: Sequence[str] | None = None,
        shuffle_window: Positive = 1000,
        decode: DecodePolicy | None = None,
        max_row_group_bytes: Bytes = MAX_ROW_GROUP_BYTES,
        retries: Count = 3,
        backoff: Seconds = 1.0,
        read_timeout: Timeout = 60.0,
    ) -> None:
        decode = decode or DecodePolicy()
        self.decode_device, on_error = decode.device, decode.on_error
        self.on_error, self.max_bad_fraction = on_error, decode.max_bad_fraction
        self.max_image_pixels, self.shuffle_window = decode.max_image_pixels, int(shuffle_window)
        self.max_jpeg_scans = decode.max_jpeg_scans
        self.image_column, self.transform = image_column, transform
        self.decode_min_side = decode_min_side(transform) if decode.reduced else None
        fixed = unique_classes(classes) if classes is not None else None
        folder = Folder(root, Network(retries, backoff, read_timeout))
        if not folder.url and (why := unfinished_write(Path(root))) is not None:
            raise ParquetFileError(f"dataset.root: {why}.")
        patterns = {"train": train_files, "val": val_files, "test": test_files}[split]
        labels = SplitLabels(label_column, "dataset.classes" if split == "train" else None)
        self.left_out: list[str] = []  # files skipped whole (on_error=skip), each said once
        for name in split_files(folder, patterns, split):
            try:
                pf, layout = read_layout(
                    folder, name, image_column, label_column, int(max_row_group_bytes)
                )
                labels.add(pf, layout)
            except ParquetFileError as err:
                if on_error != "skip":
                    raise ParquetFileError(
                        f"{err} Or set dataset.decode.on_error=skip to leave such files out."
                    ) from err
                log.warning("%s split: left out (dataset.decode.on_error=skip): %s", split, err)
                self.left_out.append(name)
        if not labels.files:
            raise ParquetFileError(
                f"dataset.{split}_files: no readable Parquet file for the {split} split under "
                f"dataset.root={shown(root)} ({len(self.left_out)} left out, each said above)."
            )
        if not labels.values:
            names = ", ".join(shown(layout.path) for layout in labels.files[:3])
            raise ParquetFileError(
                f"dataset.{split}_files: the {split} split's files hold no rows ({names}"
                f"{', ...' if len(labels.files) > 3 else ''}); give files with samples."
            )
        self.classes = labels.classes(fixed)
        self.targets = labels.targets(self.classes)
        self.multi_label = labels.multi_label
        self._folder = folder
        self._layouts: list[Layout] = labels.files
        rows = [np.asarray(layout.group_rows, dtype=np.int64) for layout in self._layouts]
        sizes = np.concatenate(rows)
        # one entry per row group of the split, in file order: its first sample's index, its
        # file, its number in the file and its first row in the file
        # (a file with no row groups adds none: exclusive sums, not [0, *cumsum[:-1]])
        self.blocks = (np.cumsum(sizes) - sizes).astype(np.int64)
        self._block_file = np.repeat(np.arange(len(rows)), [len(r) for r in rows])
        self._block_group = np.concatenate([np.arange(len(r)) for r in rows])
        self._block_row = np.concatenate([np.cumsum(r) - r for r in rows]).astype(np.int64)
        smallest = int(sizes[sizes > 0].min()) if (sizes > 0).any() else 1
        # the row groups one window spans, and one more: a worker reads each once a pass
        self._keep = max(2, math.ceil(self.shuffle_window / smallest) + 1)
        self._open: OrderedDict[int, pq.ParquetFile] = OrderedDict()
        self._groups: OrderedDict[int, pa.Array | Exception] = OrderedDict()
        self._pid = os.getpid()

    def __len__(self) -> int:
        return len(self.targets)

    def __getstate__(self) -> dict[str, Any]:
        """A worker opens the files itself (open files and read row groups stay behind)."""
        return {**self.__dict__, "_open": OrderedDict(), "_groups": OrderedDict()}

    def _where(self, index: int) -> tuple[int, int, int]:
        """(row group of the split, its file, the row in that file) of sample `index`."""
        block = int(np.searchsorted(self.blocks, index, side="right")) - 1
        row = int(self._block_row[block] + index - self.blocks[block])
        return block, int(self._block_file[block]), row

    def get_filename(self, index: int) -> str:
        """`file#row=R`: the file and the row of the file that holds sample `index`."""
        _, file, row = self._where(index)
        return f"{self._layouts[file].path}#row={row}"

    def label_name(self, index: int) -> str:
        return label_text(self.targets[index], self.classes)

    def label(self, index: int) -> int | torch.Tensor:
        if self.multi_label:
            return torch.from_numpy(self.targets[index].astype(np.float32))
        return int(self.targets[index])

    def _file(self, file: int) -> pq.ParquetFile:
        if self._pid != os.getpid():  # a forked worker: its parent's open files share their
            self._open, self._groups = OrderedDict(), OrderedDict()  # offsets with it (fsspec)
            self._pid = os.getpid()
        if file in self._open:
            self._open.move_to_end(file)
            return self._open[file]
        pf, _ = self._folder.open(self._layouts[file].path)
        self._open[file] = pf
        if len(self._open) > OPEN_FILES:
            self._open.popitem(last=False)
        return pf

    def _images(self, block: int) -> pa.Array:
        """The encoded images of row group `block`, read once and kept while the window
        needs them; a failure to read it is kept too (its every row is unreadable)."""
        if block not in self._groups:
            file, group = int(self._block_file[block]), int(self._block_group[block])
            try:
                with SUMS.timed("read"):  # the pipeline's read stage (engine/measure/stages.py)
                    table = self._file(file).read_row_group(group, columns=[self.image_column])
                    self._groups[block] = table.column(0).combine_chunks()
            except (pa.ArrowException, OSError, ShardError) as err:  # ShardError: http(s)
                self._groups[block] = err
            if len(self._groups) > self._keep:
                self._groups.popitem(last=False)
        self._groups.move_to_end(block)
        found = self._groups[block]
        if isinstance(found, Exception):
            raise ValueError(
                f"its row group cannot be read: {shown(describe_error(found))}"
            ) from found
        return found

    def _encoded(self, index: int) -> bytes:
        """The encoded image of sample `index`: its bytes in the file, or (an Image whose
        bytes `datasets` left out, as `to_parquet` of images given by path does) the local
        file its `path` names, absolute or relative to the Parquet file's folder."""
        block, file, _ = self._where(index)
        value = self._images(block)[index - int(self.blocks[block])].as_py()
        limit = max_file_bytes(self.max_image_pixels)
        if isinstance(value, dict):  # the Image struct
            if value.get("bytes") is None and value.get("path"):
                return self._linked(value["path"], self._layouts[file].path, limit)
            value = value.get("bytes")
        if not value:
            raise ValueError(f"column {self.image_column!r} holds no image bytes in this row")
        if limit is not None and len(value) > limit:
            raise ValueError(
                f"{len(value):,} bytes, more than an image within dataset.decode.max_image_pixels can take"
            )
        return value

    def _linked(self, path: str, parquet: str, limit: int | None) -> bytes:
        """The image file an Image row names instead of holding it (see _encoded)."""
        if self._folder.url:
            raise ValueError(
                f"the row holds no image bytes, only the path {shown(path)}, which a remote "
                "file cannot resolve: write the images into the file (datasets' push_to_hub "
                "embeds them; locally, cast the column to Image() of bytes before to_parquet)"
            )
        return read_regular_file(Path(parquet).parent / path, limit)

    def _decoded(self, index: int, encoded: bool = False) -> torch.Tensor | Encoded:
        """Sample `index` decoded (no transform), or (`encoded`) its bytes for a decode in the
        main process; a `SampleError` naming its file and row."""
        try:
            data, name = self._encoded(index), self.get_filename(index)
            limits = self.max_image_pixels, self.max_jpeg_scans
            if encoded:
                assert self.sends_encoded is not None  # set by the loader for encoded reads
                return encode_sample(data, name, index, self.sends_encoded, *limits)
            return decode_image_bytes(data, name, self.decode_min_side, *limits)
        except Exception as err:  # re-raised with the file, the row and the fix
            fix = "Or set" if self._from_network(err) else "Fix or rewrite the file, or set"
            raise SampleError(
                f"cannot decode sample {index} (class {self.label_name(index)!r}) from "
                f"{shown(self.get_filename(index))}: {describe_error(err)}. {fix} "
                "dataset.decode.on_error=skip to leave unreadable rows out (listed in bad_samples.csv)."
            ) from err

    def _from_network(self, err: BaseException | None) -> bool:
        """Whether `err` came from reading a remote file (its message names the server's fix,
        not the file's)."""
        while err is not None:
            if isinstance(err, (ShardError, *NETWORK)) and self._folder.url:
                return True
            err = err.__cause__ or err.__context__
        return False

    def __getitem__(self, index: int) -> tuple[torch.Tensor, int | torch.Tensor] | BadSample:
        label = self.label(index)
        try:
            image = self._decoded(index, self.sends_encoded is not None)
        except SampleError as err:
            return self._skip_or_raise(index, err)
        if self.transform is not None and self.sends_encoded is None:
            image = self.transform(image)
        return image, label
