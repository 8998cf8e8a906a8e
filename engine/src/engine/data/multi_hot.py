"""A listing's labels as multi-hot targets (multi-label data): `a|b` in one column, or one 0/1
column per class; every bad row refused with its file, line and config key."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from engine.data.listing import class_list, outside, unique_classes

COLUMN_VALUES = {"0": False, "1": True}  # what a per-class column may hold


class MultiLabelColumns:
    """Where a listing's labels are (`label_column` holding `separator`-separated names, or
    the 0/1 `label_columns`), how a row's are read, and the class list they make."""

    def __init__(
        self,
        multi_label: bool,
        label_column: str,
        separator: str,
        label_columns: Sequence[str] | None,
    ) -> None:
        if label_columns is not None and not multi_label:
            raise ValueError(
                "dataset.label_columns is set but dataset.multi_label=false: set "
                "dataset.multi_label=true (one 0/1 column per class), or unset label_columns."
            )
        if multi_label and not separator:
            raise ValueError("dataset.label_separator is empty: set it, e.g. '|' or ';'.")
        # each 0/1 column's class: its name as a class name (NFC), each once, no separator
        self.column_classes: list[str] = []
        if label_columns is not None:
            if isinstance(label_columns, str):
                raise ValueError(
                    f"dataset.label_columns={label_columns!r}: expected a list of columns, one "
                    "per class, e.g. [cat,dog]."
                )
            label_columns = [str(c) for c in label_columns]
            self.column_classes = unique_classes(label_columns, "dataset.label_columns", True)
        self.label_column, self.separator, self.label_columns = (
            label_column,
            separator,
            label_columns,
        )
        self.key = "dataset.label_columns" if label_columns is not None else "dataset.label_column"
        self.source = (
            f"columns {label_columns} ({self.key})"
            if label_columns is not None
            else f"column {label_column!r} ({self.key})"
        )
        self.columns = (
            {f"dataset.label_columns[{i}]": c for i, c in enumerate(label_columns)}
            if label_columns is not None
            else {"dataset.label_column": label_column}
        )
        self.classes: list[str] = []

    def parse(self, values: Sequence[str], where: str, allow_empty: bool) -> tuple[str, ...]:
        """The labels of one row (`values`: its label fields) at `where` (file:line)."""
        if self.label_columns is not None:
            labels = []
            columns = zip(self.label_columns, self.column_classes, values, strict=False)
            for column, name, raw in columns:
                value = raw.strip()
                if value not in COLUMN_VALUES:
                    raise ValueError(
                        f"{where}: column {column!r} (dataset.label_columns) holds {raw!r}; "
                        "expected 0 or 1."
                    )
                if COLUMN_VALUES[value]:
                    labels.append(name)
            found = tuple(labels)
        else:
            text = values[0].strip()
            tokens = [t.strip() for t in text.split(self.separator)] if text else []
            if "" in tokens:
                raise ValueError(
                    f"{where}: an empty label in {text!r} (column {self.label_column!r}, "
                    f"dataset.label_column, separated by dataset.label_separator="
                    f"{self.separator!r}); remove the extra separator."
                )
            found = tuple(dict.fromkeys(tokens))  # a label named twice counts once
        if not found and not allow_empty:
            raise ValueError(
                f"{where}: no labels in {self.source}; label the row, or set "
                "dataset.allow_empty_labels=true to keep it as an image of none of the classes."
            )
        return found

    def multi_hot(
        self,
        rows: list[tuple[str, ...]],
        classes: Sequence[str] | None,
        at: Callable[[int], str],
        fixed_by: str | None = None,
    ) -> np.ndarray:
        """The uint8 N x classes targets of `rows` (row i at `at(i)`; each label a class name,
        listing.class_name). The classes: `classes` when fixed (the val split takes the train
        split's; an unknown label is refused), else the label columns, or the sorted union of
        the labels (integers keep their value; a name holding `|` is refused);
        `fixed_by`: the key that fixed `classes` (dataset.classes), None for the train split's."""
        if classes is not None:
            self.classes = list(classes)
        elif self.label_columns is not None:
            self.classes = sorted(self.column_classes)
        else:
            owner = [i for i, row in enumerate(rows) for _ in row]
            flat = [label for row in rows for label in row]
            if not flat:
                raise ValueError(
                    f"{at(0)}: no row has a label in {self.source}: multi-label data needs at "
                    "least one labelled image."
                )
            self.classes = class_list(flat, lambda i: at(owner[i]), self.key, True)
        index = {name: i for i, name in enumerate(self.classes)}
        targets = np.zeros((len(rows), len(self.classes)), dtype=np.uint8)
        for i, row in enumerate(rows):
            for label in row:
                if label not in index:
                    raise ValueError(
                        f"{at(i)}: label {label!r} in {self.source} "
                        f"{outside(self.classes, fixed_by)}"
                    )
                targets[i, index[label]] = 1
        return targets
