"""dataset=parquet against Hugging Face `datasets` itself, both ways: files `datasets` wrote
(`Dataset.from_dict` with the Image and ClassLabel features, then `to_parquet`) train here, and
what `mode=shards shards.format=parquet` writes loads in `datasets.load_dataset("parquet")`
with the same labels, class names and image bytes (multi-label too). On Parquet, every order
the other kinds have works: weighted draws, k-fold, a source of a mix, samples.csv."""

from __future__ import annotations

import csv
import re
from pathlib import Path

import numpy as np
import pytest
import torch
from datasets import ClassLabel, Dataset, Features, Image, load_dataset

from engine.config.validate import validate_config
from engine.data.datasets.parquet import ParquetDataset
from engine.data.decode import decode_image_bytes
from engine.modes.evaluation import evaluate_checkpoint
from engine.modes.shards import shards
from engine.runs.sample_log import uses_by_epoch
from engine_dev.demo import CLASSES
from src.loop import train
from tests import checkpoint_configs

on_checkpoint = checkpoint_configs.on_checkpoint  # a fixture (mode=eval, predict configs)


def _listing(demo_dir: Path, split: str) -> list[dict[str, str]]:
    with open(demo_dir / f"{split}.csv", newline="") as f:
        return list(csv.DictReader(f))


def test_files_written_by_hugging_face_datasets_train_here(make_cfg, demo_dir, tmp_path) -> None:
    features = Features({"image": Image(), "label": ClassLabel(names=list(CLASSES))})
    root = tmp_path / "hub" / "data"
    for split, name in (("train", "train"), ("val", "validation")):
        rows = _listing(demo_dir, split)
        table = {
            "image": [str(demo_dir / r["path"]) for r in rows],
            "label": [CLASSES.index(r["label"]) for r in rows],
        }
        Dataset.from_dict(table, features=features).to_parquet(root / f"{name}-00000.parquet")
    read = ParquetDataset("train", str(root.parent))
    assert read.classes == list(CLASSES) and len(read) == 48
    expected = [CLASSES.index(r["label"]) for r in _listing(demo_dir, "train")]
    assert read.targets.tolist() == expected
    first = (demo_dir / _listing(demo_dir, "train")[0]["path"]).read_bytes()
    assert torch.equal(read[0][0], decode_image_bytes(first, "first"))
    metrics = train(
        make_cfg("dataset=parquet", f"dataset.root={root.parent}", "trainer.max_epochs=1")
    )
    assert 0.0 <= metrics["val/acc"] <= 1.0


@pytest.mark.parametrize("multi", [False, True], ids=["single-label", "multi-label"])
def test_what_mode_shards_writes_loads_in_hugging_face_datasets(make_cfg, tmp_path, multi):
    out = tmp_path / "parquet"
    source = ("experiment=multilabel_csv",) if multi else ()
    cfg = make_cfg(
        "mode=shards", *source, "shards.format=parquet", f"shards.dir={out}",
        "shards.max_samples=16", "shards.row_group_rows=4",
    )  # fmt: skip
    metrics = shards(cfg)
    assert sorted(out.glob("[!.]*"))[0].name.startswith("train-00000-of-")  # beside .shards.lock
    files = ParquetDataset("train", str(out))
    loaded = load_dataset("parquet", data_dir=str(out))
    assert set(loaded) == {"train", "validation"}
    assert metrics["shards/samples"] == len(loaded["train"]) + len(loaded["validation"])
    hub = loaded["train"].cast_column("image", Image(decode=False))
    feature = hub.features["label"]
    names = (feature.feature if multi else feature).names
    assert names == files.classes and len(hub) == len(files)
    assert files.multi_label == multi
    for i, row in enumerate(hub):
        assert torch.equal(decode_image_bytes(row["image"]["bytes"], "row"), files[i][0])
        expected = np.flatnonzero(files.targets[i]).tolist() if multi else int(files.targets[i])
        assert (sorted(row["label"]) if multi else row["label"]) == expected
    labels = ("loss=bce", "metrics=multilabel") if multi else ()  # the monitor follows them
    again = train(
        make_cfg("dataset=parquet", f"dataset.root={out}", *labels, "trainer.max_epochs=1")
    )
    assert again["epochs"] == 1


@pytest.mark.parametrize(
    "order",
    [
        ("sampler=weighted",),
        ("dataset.folds=3", "dataset.fold=1"),
        ("trainer.record_samples=true", "loader.num_workers=2"),
    ],
    ids=["weighted", "k-fold", "samples.csv"],
)
def test_every_train_order_runs_on_parquet(make_cfg, order) -> None:
    cfg = make_cfg("dataset=parquet", "trainer.max_epochs=2", *order)
    metrics = train(cfg)
    assert metrics["epochs"] == 2
    if "trainer.record_samples=true" in order:
        for counts in uses_by_epoch(Path(cfg.paths.output_dir)).values():
            assert sorted(counts) == list(range(48)) and set(counts.values()) == {1}


def test_a_parquet_source_in_a_mix(make_cfg) -> None:
    cfg = make_cfg(
        "dataset=mix", "+dataset@dataset.sources.hub.dataset=parquet",
        "+dataset.sources.hub.weight=1", "trainer.max_epochs=1",
        "dataset.sources.folder.demo=false", "dataset.sources.listed.demo=false",
    )  # fmt: skip
    metrics = train(cfg)
    assert any(key.startswith("val/hub/") for key in metrics)


def test_eval_decodes_in_its_workers_and_a_large_row_group_limit_is_a_valid_key(
    make_cfg, on_checkpoint
) -> None:
    cfg = make_cfg(
        "dataset=parquet", "trainer.max_epochs=1", "dataset.max_row_group_bytes=3000000000"
    )
    validate_config(cfg)  # a 3 GB row group: past int32, still a size in bytes
    train(cfg)
    run = cfg.paths.output_dir
    results = evaluate_checkpoint(
        on_checkpoint("mode=eval", f"eval.checkpoint={run}", "dataset.decode.device=main")
    )
    assert 0.0 <= results["val/acc"] <= 1.0


def test_encoding_keep_on_parquet_is_refused_before_the_folder_is_touched(
    make_cfg, tmp_path
) -> None:
    out = tmp_path / "again"
    cfg = make_cfg("mode=shards", "dataset=parquet", f"shards.dir={out}", "shards.format=parquet")
    with pytest.raises(ValueError, match=r"shards.encoding=keep stores image files as they are"):
        shards(cfg)
    assert not out.exists() or not any(out.iterdir())  # no .shards.lock left behind


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
