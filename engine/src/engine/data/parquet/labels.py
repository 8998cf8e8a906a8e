"""A split's labels, read from its Parquet files' label column at start-up, and the class
list they make: the schema's ClassLabel names, else the labels' own values (names sorted;
integers index the classes, as in a CSV), else the train split's. Names, and string labels,
are class names as every kind has them (engine/data/listing.py: NFC, no control character,
multi-label: no `|`). Every bad row is refused in one line naming its file and row."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from engine.core.text import shown
from engine.data.listing import (
    class_list,
    class_name,
    outside,
    refuse_separator,
    unique_classes,
)
from engine.data.parquet.files import Layout, ParquetFileError
from engine.data.parquet.layout import class_label_names
from engine.data.shards import ShardError

NO_LABEL = -1  # how Hugging Face datasets marks a row without a label (a hidden test split)


def read_column(pf: pq.ParquetFile, layout: Layout, column: str) -> list:
    """`column` of every row of the file, as Python values."""
    try:
        values = pf.read(columns=[column]).column(0)
    except ShardError as err:  # an http(s) file's network error, naming the URL and the fix
        raise ParquetFileError(str(err)) from err
    except (pa.ArrowException, OSError) as err:
        reason = shown(str(err).strip().splitlines()[0]) if str(err).strip() else type(err).__name__
        raise ParquetFileError(
            f"{shown(layout.path)}: its column {column!r} cannot be read ({reason}): the file "
            "is damaged. Download or write it again."
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
        try:
            names = class_label_names(layout.schema, self.column, shown(layout.path))
        except ValueError as err:  # metadata that does not parse, names that are no strings
            raise ParquetFileError(str(err)) from None
        if names is not None:
            listing = f"{shown(layout.path)}: the ClassLabel names of column {self.column!r}"
            names = unique_classes(
                names,
                listing,
                layout.labels.endswith("-list"),
                lambda i: f"{listing} (dataset.label_column), name {i}",
            )
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
        if layout.labels.startswith("str"):
            values = self._named(values, self.starts[-1])
        self.values += values

    def _named(self, values: list, start: int) -> list:
        """The string labels `values` (the file's, its first row the split's row `start`) as
        class names (listing.class_name), each distinct one checked once; nulls stay (refused
        with their row by `classes`). The list itself when no label changes (NFC already)."""
        multi = self.multi_label

        def holds(value: object, raw: str) -> bool:
            return value is not None and (raw in value if multi else value == raw)

        def where(raw: str) -> str:
            row = next(r for r, value in enumerate(values) if holds(value, raw))
            return f"{self.where(start + row)}, column {self.column!r} (dataset.label_column)"

        items = (item for value in values if value for item in value) if multi else values
        changed = {}
        for raw in set(items) - {None}:
            name = class_name(raw, lambda raw=raw: where(raw), "fix the row")
            if name != raw:
                changed[raw] = name
        if not changed:
            return values
        if multi:
            return [
                value if value is None else [changed.get(item, item) for item in value]
                for value in values
            ]
        return [changed.get(value, value) for value in values]

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
        if given is not None and self.multi_label and self.fixed_by is not None:
            refuse_separator(given, lambda i: f"{self.fixed_by}[{i}]")  # the train's: checked
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
        return class_list([str(v) for v in flat], where, "dataset.label_column", self.multi_label)

    def targets(self, classes: list[str]) -> np.ndarray:
        """Class indices (int64), or multi-hot rows (uint8, rows x classes)."""
        flat, where = self._flat()
        if self.names is not None or self.files[0].labels.startswith("int"):
            codes = self._codes(flat, where)
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

    def _codes(self, flat: list, where: Callable[[int], str]) -> np.ndarray:
        """The integer labels as int64; one past its range (a uint64 label) is refused."""
        try:
            return np.asarray(flat, dtype=np.int64)
        except OverflowError:
            i = next(k for k, v in enumerate(flat) if not -(2**63) <= v < 2**63)
            raise ParquetFileError(
                f"{where(i)}: label {flat[i]} (dataset.label_column) is not a class index; "
                "fix the row, or name the classes with dataset.classes."
            ) from None

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
