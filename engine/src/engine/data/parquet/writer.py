"""Writing one split as Parquet files in the Hugging Face layout (mode=shards
shards.format=parquet): `train-00000-of-00004.parquet`, ..., `validation-...` (the split name
`datasets` gives the val split), each of `max_rows` rows in row groups of `group_rows`, with
the `huggingface` features that name the classes (engine/data/parquet/layout.py). So
`datasets.load_dataset("parquet", data_dir=...)` reads them with their class names, and
dataset=parquet trains on them. A file is written under a temporary name and renamed when
complete: a reader never sees half a file. shards.dir's mark lists the files as the writer's
(engine/data/shards/writer.py `writing`), so a later write replaces them, and never a set of
the same names it did not write (a download from the Hub)."""

from __future__ import annotations

import math
import os
import re
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from engine.core.io import write_error
from engine.data.parquet.layout import schema_for

FILE_NAME = re.compile(r"\.?(train|validation)-\d{5}-of-\d{5}\.parquet(\.partial)?")  # ours
SPLIT_NAMES = {"train": "train", "val": "validation"}
OLD_MARK = (b"written_by", b"mode=shards")  # an earlier engine's mark, in each file's footer
ELSEWHERE = "the files elsewhere (another shards.dir)"


def file_names(split: str, count: int, max_rows: int) -> list[str]:
    """The files ParquetSplitWriter writes for `count` samples of `split`, and their
    temporary names."""
    files, name = max(1, math.ceil(count / max_rows)), SPLIT_NAMES[split]
    final = [f"{name}-{i:05d}-of-{files:05d}.parquet" for i in range(files)]
    return final + [f".{f}.partial" for f in final]


def recorded_files(folder: Path) -> set[str]:
    """The Parquet files in unmarked `folder` an earlier engine's writer wrote, as the mark in
    each one's footer records it: a Hugging Face set of the same names is not."""
    own = set()
    for path in folder.iterdir():
        if FILE_NAME.fullmatch(path.name) and path.suffix == ".parquet":
            try:
                metadata = pq.read_schema(path).metadata or {}
            except (OSError, pa.ArrowException):
                continue
            if metadata.get(OLD_MARK[0]) == OLD_MARK[1]:
                own.add(path.name)
    return own


class ParquetSplitWriter:
    """`count` samples of one split into files of `max_rows` rows, row groups of
    `group_rows`; `entries` holds each finished file's name, rows and size."""

    def __init__(
        self,
        folder: Path,
        split: str,
        count: int,
        classes: list[str],
        multi_label: bool,
        max_rows: int,
        group_rows: int,
    ) -> None:
        self.folder, self.split = folder, SPLIT_NAMES[split]
        self.files = max(1, math.ceil(count / max_rows))
        self.max_rows, self.group_rows = max_rows, group_rows
        self.schema = schema_for(classes, multi_label)
        self.entries: dict[str, dict] = {}
        self.writer: pq.ParquetWriter | None = None
        self.rows: list[dict] = []  # the open row group
        self.in_file = 0

    def _path(self) -> Path:
        return self.folder / f"{self.split}-{len(self.entries):05d}-of-{self.files:05d}.parquet"

    def add(self, image: bytes, path: str, label: int | list[int]) -> None:
        """One sample: its encoded image, the file name it came from, its label(s)."""
        self.rows.append({"image": {"bytes": image, "path": path}, self.schema.names[1]: label})
        self.in_file += 1
        if len(self.rows) == self.group_rows or self.in_file == self.max_rows:
            self._flush()
        if self.in_file == self.max_rows:
            self.close()

    def _flush(self) -> None:
        if not self.rows:
            return
        target = self._path()
        partial = target.with_name(f".{target.name}.partial")
        try:
            if self.writer is None:
                self.writer = pq.ParquetWriter(partial, self.schema)
            self.writer.write_table(pa.Table.from_pylist(self.rows, schema=self.schema))
        except OSError as err:
            raise write_error(err, partial, ELSEWHERE) from err
        self.rows = []

    def close(self) -> None:
        """Finish the open file (if any): its last row group, then its name."""
        self._flush()
        if self.writer is None:
            return
        target = self._path()
        partial = target.with_name(f".{target.name}.partial")
        try:
            self.writer.close()
            os.replace(partial, target)
        except OSError as err:
            raise write_error(err, target, ELSEWHERE) from err
        self.entries[target.name] = {"samples": self.in_file, "size": target.stat().st_size}
        self.writer, self.in_file = None, 0
