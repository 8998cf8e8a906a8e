"""dataset=parquet reads a folder as Hugging Face `datasets` does: multi-label ClassLabel
features (List, LargeList, fixed-length) give `datasets`' class names, ClassLabel metadata that
does not parse is refused naming the file, and the files of each split are the ones
`datasets`' own `get_data_patterns` finds, file by file (a name it reads twice or refuses is
refused here in one line)."""

from __future__ import annotations

import csv
import re
from pathlib import Path

import pytest
from datasets import ClassLabel, Dataset, Features, Image, load_dataset

from engine.data.datasets.parquet import ParquetDataset


def _listing(demo_dir: Path, split: str) -> list[dict[str, str]]:
    with open(demo_dir / f"{split}.csv", newline="") as f:
        return list(csv.DictReader(f))


NAMES = ["person", "car", "dog"]


def _hub_file(demo_dir: Path, tmp_path: Path, feature, labels: list) -> Path:
    """A train file as `datasets` 5 writes it: demo images, `labels` of `feature`."""
    images = [str(demo_dir / r["path"]) for r in _listing(demo_dir, "train")][: len(labels)]
    features = Features({"image": Image(), "labels": feature})
    path = tmp_path / "hub" / "data" / "train-00000-of-00001.parquet"
    Dataset.from_dict({"image": images, "labels": labels}, features=features).to_parquet(path)
    return path


@pytest.mark.parametrize(
    "feature",
    ["List", "LargeList", "List(length=2)"],
)
def test_multi_label_class_label_features_read_as_datasets_reads_them(
    demo_dir, tmp_path, feature
) -> None:
    """`datasets` 5 writes multi-label as List or LargeList of ClassLabel (or a fixed-length
    List): the class names are its names here too, never '0', '1', '2'."""
    from datasets import LargeList, List

    label = ClassLabel(names=NAMES)
    kind = {"List": List(label), "LargeList": LargeList(label), "List(length=2)": List(label, 2)}
    labels = [[0, 2], [1, 1]] if feature.endswith("=2)") else [[0, 2], [1]]
    path = _hub_file(demo_dir, tmp_path, kind[feature], labels)
    theirs = load_dataset("parquet", data_files=str(path), split="train")
    ours = ParquetDataset("train", str(path.parent.parent), label_column="labels")
    assert ours.classes == theirs.features["labels"].feature.names == NAMES
    hot = ours.targets.astype(bool).tolist()
    assert [[i for i, on in enumerate(row) if on] for row in hot] == [
        sorted(set(row)) for row in theirs["labels"]
    ]


@pytest.mark.parametrize(
    ("metadata", "says"),
    [
        (b"{oops", "is not JSON"),
        (b"\xff\xfe", "is not JSON"),
        (b"[" * 200_000 + b"]" * 200_000, "is not JSON (nested too deeply)"),
        (
            b'{"info": {"features": {"label": {"_type": "ClassLabel", "names": [1, 2]}}}}',
            "its label feature.names[0] is 1, not a string",
        ),
    ],
)
def test_class_label_metadata_that_does_not_parse_is_refused_naming_the_file(
    demo_dir, tmp_path, metadata, says
) -> None:
    """Names that cannot be read were silently '0'..'K-1'; a nesting 200,000 deep a raw
    RecursionError."""
    import pyarrow.parquet as pq

    from engine.data.parquet.files import ParquetFileError

    path = _hub_file(demo_dir, tmp_path, ClassLabel(names=NAMES), [0, 2])
    table = pq.read_table(path).rename_columns(["image", "label"])
    table = table.replace_schema_metadata({b"huggingface": metadata})
    pq.write_table(table, path)
    with pytest.raises(ParquetFileError, match=r"train-00000-of-00001\.parquet: its huggingface "
                       r"metadata.*" + re.escape(says) + r".*write the file again"):  # fmt: skip
        ParquetDataset("train", str(path.parent.parent))


LAYOUTS = {  # the files of a dataset folder, as users and the Hub lay them out
    "hub shards": ["data/train-00000-of-00002.parquet", "data/train-00001-of-00002.parquet",
                   "data/validation-00000-of-00001.parquet", "data/test-00000-of-00001.parquet"],
    "a split folder beats the file's word": ["test/train-0.parquet", "train/a.parquet"],
    "data/ shards beat a file beside them": ["train.parquet", "data/train-00000-of-00001.parquet"],
    "file names": ["train.parquet", "validation.parquet", "my_test_set.parquet"],
    "dev, eval and evaluation": ["dev.parquet", "eval.parquet", "training-1.parquet"],
    "a Spark folder": ["train.parquet/part-0.parquet", "validation.parquet/part-0.parquet"],
    "words inside other words": ["retrain.parquet", "contest.parquet", "train.parquet"],
    "a folder naming one split": ["validation/a.parquet", "train-0.parquet"],
    "names in capitals (datasets' globs are case-sensitive)": ["Train-0.parquet", "TEST/b.parquet", "train/y.parquet"],
    "no split word: all train": ["a.parquet", "b/c.parquet"],
    "sharded under another split name": ["data/custom-00000-of-00001.parquet", "train.parquet"],
    "sharded val": ["data/train-00000-of-00001.parquet", "data/val-00000-of-00001.parquet"],
}  # fmt: skip
HUB_SPLITS = {"train": "train", "validation": "val", "val": "val", "test": "test"}
REFUSED = {  # where datasets reads a file in two splits, or refuses a name: refused in one line
    "a file naming two splits": (["train_test.parquet"], "name the train and test splits in it"),
    "a sharded name that is no split": (["data/my-train-00000-of-00001.parquet"], "no split name"),
}


@pytest.mark.parametrize("layout", list(LAYOUTS))
def test_the_files_of_each_split_are_the_ones_datasets_finds(tmp_path, layout) -> None:
    """The split of every file as `datasets` resolves a folder's data files
    (`get_data_patterns`), file by file: dataset=parquet with dataset.root alone."""
    from datasets.data_files import DataFilesDict, get_data_patterns

    from engine.data.parquet.files import splits_of

    for name in LAYOUTS[layout]:
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_bytes(b"PAR1")
    found = DataFilesDict.from_patterns(get_data_patterns(str(tmp_path)), str(tmp_path))
    theirs = {
        str(Path(f).relative_to(tmp_path)): HUB_SPLITS[split]
        for split, files in found.items()
        for f in files
        if split in HUB_SPLITS  # another split name (`custom`) is none of the template's
    }
    ours, _ = splits_of(sorted(LAYOUTS[layout]))
    assert ours == theirs


@pytest.mark.parametrize("layout", list(REFUSED))
def test_where_datasets_reads_a_file_twice_or_refuses_its_name_it_is_refused_here(
    tmp_path, layout
) -> None:
    from engine.data.parquet.files import splits_of

    names, says = REFUSED[layout]
    with pytest.raises(ValueError, match=re.escape(says)):
        splits_of(names)
