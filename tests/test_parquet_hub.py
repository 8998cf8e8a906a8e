"""dataset=parquet against Hugging Face `datasets` itself, both ways, as the project trains:
files `datasets` wrote (`Dataset.from_dict` with the Image and ClassLabel features, then
`to_parquet`) train here, and what `mode=shards shards.format=parquet` writes loads in
`datasets.load_dataset("parquet")` with the same labels, class names and image bytes
(multi-label too). On Parquet, every order the other kinds have works: weighted draws, k-fold,
a source of a mix, samples.csv. How files, splits and ClassLabel metadata are read as
`datasets` reads them: the engine's tests/test_parquet_hub.py."""

from __future__ import annotations

import csv
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
from engine_dev.api import uses_by_epoch
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
