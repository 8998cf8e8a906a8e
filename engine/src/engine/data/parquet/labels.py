"""A split's labels, read from its Parquet files' label column at start-up, and the class
list they make: the schema's ClassLabel names, else the labels' own values (names sorted;
integers index the classes, as in a CSV), else the train split's. Every bad row is refused in
one line naming its file and row."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from engine.core.text import shown
from engine.data.listing import class_list, outside
from engine.data.parquet.files import Layout, ParquetFileError
from engine.data.parquet.layout import class_label_names

NO_LABEL = -1  # how Hugging Face datasets marks a row without a label (a hidden test split)


def read_column(pf: pq.ParquetFile, layout: Layout, column: str) -> list:
    """`column` of every row of the file, as Python values."""
    try:
        values = pf.read(columns=[column]).column(0)
    except (pa.ArrowException, OSError) as err:
        raise ParquetFileError(
            f"{shown(layout.path)}: its column {column!r} cannot be read ({err}): the file is "
            "damaged. Download or write it again."
        ) from err
    return values.to_pylist()


class SplitLabels:
    """The labels of a split's files, in file and row order, and where each row is."""

    def __init__(self, label_column: str, fixed_by: str | None) -> None:
        self.column, self.fixed_by = label_column, fixed_by
        self.values: list = []  # every row's label as stored (int, str or a list)
        self.files: list[Layout] = []
        self.starts: list[int] = []  # first row of each file in the split
        self.names: list[str] | None = None  # ClassLabel names, the same in every file

    def add(self, pf: pq.ParquetFile, layout: Layout) -> None:
        names = class_label_names(layout.schema, self.column)
        if self.files and names != self.names:
            raise ParquetFileError(
                f"dataset.label_column={self.column!r}: {shown(layout.path)} names the classes "
                f"{names}, {shown(self.files[0].path)} {self.names}: the files of a split must "
                "share one class list."
            )
        if self.files and layout.labels != self.files[0].labels:
            raise ParquetFileError(
                f"dataset.label_column={self.column!r}: {shown(layout.path)} holds "
                f"{layout.labels} labels, {shown(self.files[0].path)} {self.files[0].labels}: "
                "the files of a split must store their labels alike."
            )
        values = read_column(pf, layout, self.column)
        if len(values) != sum(layout.group_rows):
            raise ParquetFileError(
                f"{shown(layout.path)}: its footer declares {sum(layout.group_rows):,} rows, its "
                f"column {self.column!r} holds {len(values):,}: the footer is damaged. "
                "Download or write it again."
            )
        self.names = names
        self.starts.append(len(self.values))
        self.files.append(layout)
        self.values += values

    def where(self, index: int) -> str:
        """`file: row R` of the split's row `index`."""
        k = int(np.searchsorted(self.starts, index, side="right")) - 1
        return f"{shown(self.files[k].path)}: row {index - self.starts[k]}"

    @property
    def multi_label(self) -> bool:
        return bool(self.files) and self.files[0].labels.endswith("-list")

    def classes(self, given: Sequence[str] | None) -> list[str]:
        """The class list: `given` (dataset.classes, or the train split's), else the
        ClassLabel names, else the labels' values (engine/data/listing.py class_list)."""
        self._refuse_nulls()
        if given is not None:
            if self.names is not None and list(self.names) != list(given):
                raise ParquetFileError(
                    f"{shown(self.files[0].path)} names the classes {self.names}, the train "
                    f"split (or dataset.classes) {list(given)}: train and evaluate on files of "
                    "one dataset, or set dataset.classes to the names these files use."
                )
            return list(given)
        if self.names is not None:
            return list(self.names)
        flat, where = self._flat()
        return class_list([str(v) for v in flat], where, "dataset.label_column")

    def targets(self, classes: list[str]) -> np.ndarray:
        """Class indices (int64), or multi-hot rows (uint8, rows x classes)."""
        flat, where = self._flat()
        if self.names is not None or self.files[0].labels.startswith("int"):
            codes = np.asarray(flat, dtype=np.int64)
            self._refuse_codes(codes, len(classes), where)
        else:
            index = {name: i for i, name in enumerate(classes)}
            codes = np.fromiter((index.get(v, -1) for v in flat), np.int64, len(flat))
            if (codes < 0).any():
                i = int(np.flatnonzero(codes < 0)[0])
                raise ParquetFileError(
                    f"{where(i)}: label {flat[i]!r} (dataset.label_column) "
                    f"{outside(classes, self.fixed_by)}"
                )
        if not self.multi_label:
            return codes
        hot = np.zeros((len(self.values), len(classes)), dtype=np.uint8)
        rows = np.repeat(np.arange(len(self.values)), [len(v) for v in self.values])
        hot[rows, codes] = 1
        return hot

    def _flat(self) -> tuple[list, Callable[[int], str]]:
        """Every label (a list's items one by one) and where the i-th of them is."""
        if not self.multi_label:
            return self.values, self.where
        owner = np.repeat(np.arange(len(self.values)), [len(v) for v in self.values])
        flat = [item for row in self.values for item in row]
        return flat, lambda i: self.where(int(owner[i]))

    def _refuse_nulls(self) -> None:
        for i, value in enumerate(self.values):
            if value is None or (self.multi_label and any(item is None for item in value)):
                raise ParquetFileError(
                    f"{self.where(i)}: no label in column {self.column!r} "
                    f"(dataset.label_column); label the row, or leave it out of the file."
                )

    def _refuse_codes(self, codes: np.ndarray, count: int, where: Callable[[int], str]) -> None:
        bad = np.flatnonzero((codes < 0) | (codes >= count))
        if not len(bad):
            return
        i = int(bad[0])
        if codes[i] == NO_LABEL:
            raise ParquetFileError(
                f"{where(i)}: label -1, which Hugging Face datasets writes for a row without a "
                "label (a hidden test split): train and evaluate on labelled splits."
            )
        raise ParquetFileError(
            f"{where(i)}: label {int(codes[i])} (dataset.label_column) is not a class index "
            f"0..{count - 1} of {count} classes; fix the row, or name the classes with "
            "dataset.classes."
        )
