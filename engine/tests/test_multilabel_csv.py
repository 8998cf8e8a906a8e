"""Multi-label CSV listings read by the engine's CsvDataset: labels become multi-hot rows over
the sorted union, a separator and per-class columns read alike, and every bad row, column or
setting is refused naming its file, line and key; the val split takes the train classes. The
template keeps loss=bce, metrics=multilabel and training on such data (tests/test_multilabel.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from engine.data.datasets.csv import CsvDataset
from engine_dev.small_sets import write_listing


def listed(folder: Path, rows: list[tuple[str, str, str]], **keys) -> CsvDataset:
    listing = write_listing(folder, rows)
    return CsvDataset("train", csv=str(listing), label_column="labels", multi_label=True, **keys)


def test_labels_become_multi_hot_rows_over_the_sorted_union(tmp_path: Path) -> None:
    rows = [("img/0.png", "red|blue", "train"), ("img/1.png", " green ", "train"),
            ("img/2.png", "", "train"), ("img/3.png", "blue|red|blue", "train")]  # fmt: skip
    data = listed(tmp_path, rows)
    assert data.classes == ["blue", "green", "red"]
    assert data.targets.tolist() == [[1, 0, 1], [0, 1, 0], [0, 0, 0], [1, 0, 1]]
    _, label = data[0]
    assert label.dtype == torch.float32 and label.tolist() == [1.0, 0.0, 1.0]
    assert data.multi_label and data.label_name(3) == "blue|red"


def test_a_separator_and_per_class_columns_read_alike(tmp_path: Path) -> None:
    write_listing(tmp_path, [("img/0.png", "red", "train"), ("img/1.png", "", "train")])
    columns = tmp_path / "columns.csv"
    columns.write_text("path,split,red,green\nimg/0.png,train,1,0\nimg/1.png,train,0,0\n")
    data = CsvDataset("train", csv=str(columns), multi_label=True, label_columns=["red", "green"])
    assert data.classes == ["green", "red"]  # sorted, like the labels of a column
    assert data.targets.tolist() == [[0, 1], [0, 0]]
    semi = tmp_path / "semi.csv"
    semi.write_text("path,labels,split\nimg/0.png,red;green,train\n")
    data = CsvDataset(
        "train", csv=str(semi), label_column="labels", multi_label=True, label_separator=";"
    )
    assert data.classes == ["green", "red"] and data.targets.tolist() == [[1, 1]]


BAD_ROWS = [
    # (CSV text after the header, keys, the line named, words of the message)
    ("img/0.png,red,train\nimg/1.png,,train\n", {"allow_empty_labels": False}, 3,
     ["no labels", "dataset.allow_empty_labels=true"]),
    ("img/0.png,red||blue,train\n", {}, 2, ["empty label", "dataset.label_separator"]),
    ("img/0.png,red,train\nimg/1.png,green,train\n", {"classes": ["red"]}, 3,
     ["'green'", "is not in dataset.classes=['red']", "add the class to dataset.classes"]),
    ("img/0.png,red,train\n", {"classes": ["red", "green", "red"]}, None,
     ["dataset.classes=['red', 'green', 'red']", "'red' is listed twice"]),
    ("img/0.png,,train\nimg/1.png,,train\n", {}, 2, ["no row has a label"]),
]  # fmt: skip


@pytest.mark.parametrize(("body", "keys", "line", "words"), BAD_ROWS)
def test_every_bad_row_is_refused_naming_file_line_and_key(
    tmp_path: Path, body: str, keys: dict, line: int | None, words: list[str]
) -> None:
    write_listing(tmp_path, [("img/0.png", "", "train"), ("img/1.png", "", "train")])
    listing = tmp_path / "bad.csv"
    listing.write_text("path,labels,split\n" + body)
    with pytest.raises(ValueError) as err:
        CsvDataset("train", csv=str(listing), label_column="labels", multi_label=True, **keys)
    message = str(err.value)
    assert (line is None or f"{listing}:{line}:" in message) and "\n" not in message
    for word in words:
        assert word in message


def test_bad_columns_and_settings_are_refused_naming_the_key(tmp_path: Path) -> None:
    write_listing(tmp_path, [("img/0.png", "", "train")])
    listing = tmp_path / "columns.csv"
    listing.write_text("path,split,red,green\nimg/0.png,train,1,yes\n")
    cases = [
        ({"multi_label": True, "label_columns": ["red", "green"]}, f"{listing}:2:", "'green'"),
        ({"multi_label": True, "label_columns": ["red", "red"]}, "label_columns", "repeat"),
        ({"label_columns": ["red"]}, "dataset.multi_label=true", "label_columns"),
        ({"multi_label": True, "label_columns": ["nope"]}, "dataset.label_columns[0]", "nope"),
        ({"multi_label": True, "label_separator": ""}, "dataset.label_separator", "empty"),
    ]
    for keys, *words in cases:
        with pytest.raises(ValueError) as err:
            CsvDataset("train", csv=str(listing), **keys)
        assert all(word in str(err.value) for word in words), (keys, str(err.value))


def test_the_val_split_takes_the_train_classes_and_refuses_new_ones(tmp_path: Path) -> None:
    rows = [("img/0.png", "red", "train"), ("img/1.png", "green|red", "val"),
            ("img/2.png", "blue", "val")]  # fmt: skip
    listing = write_listing(tmp_path, rows)
    with pytest.raises(ValueError, match=rf"{listing}:4: label 'blue'.*not a train class"):
        CsvDataset("val", csv=str(listing), label_column="labels", multi_label=True,
                   classes=["green", "red"])  # fmt: skip
