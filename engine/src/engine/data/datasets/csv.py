"""Images listed in CSV files: a path column and a label column (names or integers), or
several labels per image (multi-label: `a|b` in the label column, or one 0/1 column per
class)."""

from __future__ import annotations

import codecs
import os
from array import array
from collections.abc import Iterator, Sequence
from pathlib import Path

import numpy as np

from engine.data.datasets.base import Transform
from engine.data.datasets.image_files import LabelledImageFiles
from engine.data.decode_policy import DecodePolicy
from engine.data.listing import (
    RootGuard,
    class_list,
    class_name,
    outside,
    read_csv_rows,
    unique_classes,
)
from engine.data.multi_hot import MultiLabelColumns

SPLITS = ("train", "val", "test")


class CsvDataset(LabelledImageFiles):
    """One split of images listed in CSV: `train_csv` + `val_csv` (+ `test_csv`), or one `csv`
    with a split column (`train`, `val`, `test`).

    Relative paths resolve against `root` (default: the folder of the CSV file). With
    `multi_label`, a row's labels are `label_separator`-separated in `label_column`, or 0/1 in
    the `label_columns` (engine/data/multi_hot.py), and its target is
    multi-hot.
    """

    splits = SPLITS

    def __init__(
        self,
        split: str,
        train_csv: str | None = None,
        val_csv: str | None = None,
        csv: str | None = None,
        test_csv: str | None = None,
        split_column: str = "split",
        path_column: str = "path",
        label_column: str = "label",
        root: str | None = None,
        transform: Transform | None = None,
        classes: Sequence[str] | None = None,
        check_files: bool = True,
        csv_encoding: str = "utf-8",
        decode: DecodePolicy | None = None,
        multi_label: bool = False,
        label_separator: str = "|",
        label_columns: Sequence[str] | None = None,
        allow_empty_labels: bool = True,
    ) -> None:
        if classes is not None:  # fixed (dataset.classes), or the train split's (val, test)
            classes = unique_classes(classes, multi_label=multi_label)
        # a label outside a fixed list: fixed by dataset.classes, or the train split's
        fixed_by = "dataset.classes" if split == "train" else None
        tags = MultiLabelColumns(multi_label, label_column, label_separator, label_columns)
        columns = {"dataset.path_column": path_column, **tags.columns}
        try:
            codecs.lookup(csv_encoding)
        except LookupError:
            raise ValueError(
                f"dataset.csv_encoding={csv_encoding!r} is not a text encoding Python knows "
                "(e.g. utf-8, latin-1, cp1252, utf-16)."
            ) from None
        if csv is not None and train_csv is None and val_csv is None:
            csv_path = Path(csv)
            columns["dataset.split_column"] = split_column
            rows = self._split_rows(csv_path, columns, split, csv_encoding)
        elif csv is None and train_csv is not None and val_csv is not None:
            listing = {"train": train_csv, "val": val_csv, "test": test_csv}[split]
            if listing is None:
                raise FileNotFoundError(
                    "dataset.test_csv is null: set it to the CSV of the test split, or use one "
                    "dataset.csv whose split column marks test rows."
                )
            csv_path = Path(listing)
            rows = read_csv_rows(csv_path, columns, csv_encoding)
        else:
            raise ValueError(
                "dataset: set either dataset.train_csv and dataset.val_csv, or dataset.csv with "
                f"dataset.split_column (got train_csv={train_csv}, val_csv={val_csv}, csv={csv})."
            )
        guard = RootGuard(Path(root) if root is not None else csv_path.parent, path_column)
        # one entry per row, nothing else: encoded paths, labels (one string object per
        # distinct label), line numbers; the `where` of an error is made only when it is raised
        paths: list[bytes] = []
        labels: list[str | tuple[str, ...]] = []
        lines = array("q")
        seen: set[bytes] = set()
        # each distinct label as written -> its class name (listing.class_name: NFC, checked
        # once, then spaces at its ends taken off), one string object per name however many
        # rows and spellings
        names: dict[str, str] = {}
        spelled: dict[str, str] = {}

        def named(raw: str, where: str) -> str:
            name = names.get(raw)
            if name is None:
                name = class_name(raw, lambda: f"{where}: {tags.source}", "fix the row").strip()
                name = names[raw] = spelled.setdefault(name, name)
            return name

        for line, (raw_path, *raw_labels) in rows:
            where = f"{csv_path}:{line}"
            if multi_label:
                if tags.label_columns is None and raw_labels[0].strip():
                    # the field as written, before parse strips its labels' ends: a control
                    # or format character is refused wherever it is, never stripped
                    class_name(
                        raw_labels[0], lambda where=where: f"{where}: {tags.source}", "fix the row"
                    )
                found = tags.parse(raw_labels, where, allow_empty_labels)
                # two spellings of one name (NFC) in a row count once, as a name twice does
                label: str | tuple[str, ...] = tuple(
                    dict.fromkeys(named(tag, where) for tag in found)
                )
            else:
                if not raw_labels[0].strip(" "):
                    raise ValueError(f"{where}: empty {label_column!r} (dataset.label_column).")
                label = named(raw_labels[0], where)  # a tab at its end is refused, not stripped
            raw = raw_path.strip()
            if not raw:
                raise ValueError(f"{where}: empty {path_column!r} (dataset.path_column).")
            path = os.fsencode(guard.resolve(raw, where, check_files))
            if path in seen:
                raise ValueError(
                    f"{where}: {raw!r} is listed twice for split {split!r} (lines "
                    f"{lines[paths.index(path)]} and {line}). Remove one of the rows."
                )
            seen.add(path)
            paths.append(path)
            labels.append(label)  # names interned by `named`
            lines.append(line)
        if not paths:
            raise ValueError(f"{csv_path}: no rows for split {split!r}.")
        del seen  # before the arrays are built: the peak of the listing

        def at(i: int) -> str:
            return f"{csv_path}:{lines[i]}"

        key = tags.key
        if multi_label:
            targets = tags.multi_hot(labels, classes, at, fixed_by)  # type: ignore[arg-type]
            classes = tags.classes
        else:
            classes = (
                list(classes)
                if classes is not None
                else class_list(labels, at, f"column {label_column!r}, {key}")  # type: ignore[arg-type]
            )
            index = {name: i for i, name in enumerate(classes)}
            unknown = set(spelled) - set(index)
            if unknown:
                i = next(i for i, label in enumerate(labels) if label in unknown)
                raise ValueError(f"{at(i)}: label {labels[i]!r} {outside(classes, fixed_by)}")
            targets = np.fromiter((index[label] for label in labels), np.int64, len(labels))  # type: ignore[index]
        super().__init__(
            np.array(paths, dtype=np.bytes_),
            targets,
            classes,
            transform,
            decode,
        )

    @staticmethod
    def _split_rows(
        csv_path: Path, columns: dict[str, str], split: str, encoding: str
    ) -> Iterator[tuple[int, tuple[str, ...]]]:
        """The rows of `split` (the last column); every row's split must be one of SPLITS."""
        for line, row in read_csv_rows(csv_path, columns, encoding):
            value = row[-1].strip()
            if value not in SPLITS:
                raise ValueError(
                    f"{csv_path}:{line}: {columns['dataset.split_column']!r} is {row[-1]!r}; "
                    f"expected one of {SPLITS} (dataset.split_column)."
                )
            if value == split:
                yield line, row
