"""Images listed in CSV files: a path column and a label column (names or integers)."""

from __future__ import annotations

import csv
import os
from collections.abc import Sequence
from pathlib import Path

from src.data.datasets.files import LabelledImageFiles, Transform

SPLITS = ("train", "val")


def _inside(base: Path, raw: str, where: str, path_column: str) -> str:
    """`raw` joined to `base`, lexically normalised; an error if it leaves `base` (`..`, an
    absolute path elsewhere, `~`). Nothing is followed or read to decide."""
    top = os.path.abspath(base)
    path = os.path.normpath(os.path.join(top, raw))
    if raw.startswith("~") or os.path.commonpath([top, path]) != top:
        raise ValueError(
            f"{where}: {raw!r} (column {path_column!r}) points outside the dataset root {top} "
            "(dataset.root; null = the CSV's folder). List paths relative to the root, or set "
            "dataset.root to a folder that contains every file."
        )
    return path


def _read_rows(csv_path: Path, columns: dict[str, str]) -> list[tuple[int, dict[str, str]]]:
    """Rows of `csv_path` as (line number, row); checks that the `columns` (key -> name) exist."""
    if not csv_path.is_file():
        raise FileNotFoundError(f"{csv_path} does not exist (set by dataset.train_csv/val_csv/csv)")
    with open(csv_path, newline="", encoding="utf-8-sig") as f:
        reader = csv.DictReader(f)
        header = reader.fieldnames or []
        for key, column in columns.items():
            if column not in header:
                raise ValueError(
                    f"{csv_path}:1: no column {column!r} (dataset.{key}); columns found: "
                    f"{header}. Set dataset.{key} to one of them."
                )
        return [(reader.line_num, row) for row in reader]


def class_list(labels: list[tuple[str, str]]) -> list[str]:
    """Class names from (location, label) pairs: integer labels keep their value as index."""
    values = [label for _, label in labels]
    if all(v.lstrip("-").isdigit() for v in values):
        for where, v in labels:
            if int(v) < 0:
                raise ValueError(f"{where}: negative label {v}; integer labels count from 0.")
        return [str(i) for i in range(max(int(v) for v in values) + 1)]
    return sorted(set(values))


class CsvDataset(LabelledImageFiles):
    """One split of images listed in CSV: `train_csv` + `val_csv`, or one `csv` with a split column.

    Relative paths resolve against `root` (default: the folder of the CSV file).
    """

    def __init__(
        self,
        split: str,
        train_csv: str | None = None,
        val_csv: str | None = None,
        csv: str | None = None,
        split_column: str = "split",
        path_column: str = "path",
        label_column: str = "label",
        root: str | None = None,
        transform: Transform | None = None,
        classes: Sequence[str] | None = None,
        check_files: bool = True,
        on_error: str = "raise",
        max_bad_fraction: float = 0.01,
        reduced_decode: bool = True,
    ) -> None:
        columns = {"path_column": path_column, "label_column": label_column}
        if csv is not None and train_csv is None and val_csv is None:
            csv_path = Path(csv)
            columns["split_column"] = split_column
            rows = [
                (line, row)
                for line, row in self._split_rows(csv_path, columns, split_column)
                if row[split_column].strip() == split
            ]
        elif csv is None and train_csv is not None and val_csv is not None:
            csv_path = Path(train_csv if split == "train" else val_csv)
            rows = _read_rows(csv_path, columns)
        else:
            raise ValueError(
                "dataset: set either dataset.train_csv and dataset.val_csv, or dataset.csv with "
                f"dataset.split_column (got train_csv={train_csv}, val_csv={val_csv}, csv={csv})."
            )
        if not rows:
            raise ValueError(f"{csv_path}: no rows for split {split!r}.")
        base = Path(root) if root is not None else csv_path.parent
        labels = []
        paths = []
        first_line: dict[str, int] = {}
        for line, row in rows:
            where = f"{csv_path}:{line}"
            label = (row[label_column] or "").strip()
            if not label:
                raise ValueError(f"{where}: empty {label_column!r} (dataset.label_column).")
            labels.append((where, label))
            raw = (row[path_column] or "").strip()
            if not raw:
                raise ValueError(f"{where}: empty {path_column!r} (dataset.path_column).")
            path = _inside(base, raw, where, path_column)
            if path in first_line:
                raise ValueError(
                    f"{where}: {raw!r} is listed twice for split {split!r} (lines "
                    f"{first_line[path]} and {line}). Remove one of the rows."
                )
            first_line[path] = line
            if check_files and not os.path.isfile(path):
                raise FileNotFoundError(
                    f"{where}: {path} does not exist (column {path_column!r}, resolved against "
                    f"{base}; set dataset.root if the paths are relative to another folder)."
                )
            paths.append(path)
        classes = list(classes) if classes is not None else class_list(labels)
        index = {name: i for i, name in enumerate(classes)}
        targets = []
        for where, label in labels:
            if label not in index:
                raise ValueError(
                    f"{where}: label {label!r} is not a train class {classes}. "
                    "Fix the row, or add the class to the train split."
                )
            targets.append(index[label])
        super().__init__(
            paths, targets, classes, transform, on_error, max_bad_fraction, reduced_decode
        )

    @staticmethod
    def _split_rows(
        csv_path: Path, columns: dict[str, str], split_column: str
    ) -> list[tuple[int, dict[str, str]]]:
        rows = _read_rows(csv_path, columns)
        for line, row in rows:
            if (row[split_column] or "").strip() not in SPLITS:
                raise ValueError(
                    f"{csv_path}:{line}: {split_column!r} is {row[split_column]!r}; "
                    f"expected one of {SPLITS} (dataset.split_column)."
                )
        return rows
