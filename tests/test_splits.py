"""The splits a dataset kind reads: test splits (asked for by mode=eval only), a CSV listing
given on its own, and the fixed class-spread sample of a limited validation."""

from __future__ import annotations

import csv
import shutil
from collections import Counter
from pathlib import Path

import pytest
import torch
from hydra.errors import InstantiationException
from hydra.utils import instantiate

from engine.api import assemble
from engine.data.splits import build_split
from engine_dev.api import without_fold_keys

CLASSES = ["circle", "cross", "square", "star", "triangle"]


def _with_test_folder(demo_dir: Path, tmp_path: Path) -> Path:
    """A copy of the demo ImageFolder root whose test/ is a copy of val/."""
    root = tmp_path / "imagefolder"
    shutil.copytree(demo_dir / "imagefolder", root)
    shutil.copytree(root / "val", root / "test")
    return root


def test_imagefolder_reads_test_only_when_asked(make_cfg, demo_dir: Path, tmp_path) -> None:
    root = _with_test_folder(demo_dir, tmp_path)
    cfg = make_cfg(f"dataset.root={root}")
    test = build_split(cfg.dataset, "test", None, CLASSES)
    assert len(test) == 30 and test.classes == CLASSES
    assert "/test/" in test.get_filename(0)
    plain = make_cfg()  # the demo root has no test/: training never looks for it
    parts = assemble(plain)
    assert len(parts.val_set) == 30
    with pytest.raises(InstantiationException, match=r"no test split .*eval\.split=val"):
        build_split(plain.dataset, "test", None, CLASSES)


def test_csv_test_split_from_test_csv_or_split_column(make_cfg, demo_dir: Path, tmp_path) -> None:
    with open(demo_dir / "samples.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    listing = tmp_path / "all.csv"
    with open(listing, "w", newline="") as f:
        writer = csv.DictWriter(f, ["path", "label", "split"])
        writer.writeheader()
        for row in rows:  # the val rows serve as the test split too
            writer.writerow(row)
            if row["split"] == "val":
                writer.writerow(row | {"split": "test"})
    root = f"dataset.root={demo_dir}"
    one = make_cfg("dataset=csv", f"dataset.csv={listing}", root)  # no train_csv/val_csv given
    assert one.dataset.train_csv is None and one.dataset.val_csv is None
    assert len(build_split(one.dataset, "test", None, CLASSES)) == 30
    two = make_cfg("dataset=csv", f"dataset.test_csv={demo_dir / 'val.csv'}")
    assert len(build_split(two.dataset, "test", None, CLASSES)) == 30
    with pytest.raises(InstantiationException, match=r"dataset\.test_csv is null"):
        build_split(make_cfg("dataset=csv").dataset, "test", None, CLASSES)


def test_csv_listing_on_its_own_trains_and_both_listings_are_refused(make_cfg, demo_dir) -> None:
    one = make_cfg("dataset=csv", f"dataset.csv={demo_dir / 'samples.csv'}")
    assert len(instantiate(without_fold_keys(one.dataset), split="train")) == 48
    both = make_cfg(
        "dataset=csv",
        f"dataset.csv={demo_dir / 'samples.csv'}",
        f"dataset.train_csv={demo_dir / 'train.csv'}",
        f"dataset.val_csv={demo_dir / 'val.csv'}",
    )
    with pytest.raises(InstantiationException, match=r"set either dataset\.train_csv"):
        instantiate(without_fold_keys(both.dataset), split="train")


def test_tensor_test_path(make_cfg, demo_dir: Path) -> None:
    val = demo_dir / "tensors" / "val.pt"
    test = build_split(
        make_cfg("dataset=tensor", f"dataset.test_path={val}").dataset, "test", None, CLASSES
    )
    assert len(test) == 30
    with pytest.raises(InstantiationException, match=r"dataset\.test_path is null"):
        build_split(make_cfg("dataset=tensor").dataset, "test", None, CLASSES)


def test_a_kind_without_a_test_split_is_refused_by_name(make_cfg) -> None:
    cfg = make_cfg("dataset=sequences")
    with pytest.raises(ValueError, match=r"eval\.split=test: dataset\._target_=.*JsonlSequences"):
        build_split(cfg.dataset, "test", None, ["a", "b", "c"])


def test_limited_validation_is_spread_over_the_classes(make_cfg) -> None:
    # debug=fast: 2 val batches; the val set is sorted by class (6 of each of 5)
    parts = assemble(make_cfg("debug=fast", "loader.batch_size=8"))
    labels = torch.cat([labels for _, labels in parts.val_loader])
    assert len(labels) == 16
    counts = Counter(labels.tolist())
    assert sorted(counts) == [0, 1, 2, 3, 4] and max(counts.values()) - min(counts.values()) <= 1
    again = torch.cat([labels for _, labels in parts.val_loader])
    assert torch.equal(labels, again)  # the same sample every epoch


def test_imagefolder_val_fraction_lists_its_draw_in_split_csv(make_cfg, demo_dir, tmp_path) -> None:
    flat = shutil.copytree(demo_dir / "imagefolder" / "train", tmp_path / "flat")  # root/<class>/*
    cfg = make_cfg(f"dataset.root={flat}", "dataset.val_fraction=0.25", "dataset.split_seed=3")
    parts = assemble(cfg)
    assert len(parts.train_set) + len(parts.val_set) == 48 and len(parts.val_set) >= 10
    listing = Path(cfg.paths.output_dir) / "split.csv"
    with open(listing, newline="") as f:
        rows = list(csv.DictReader(f))
    drawn = {
        split: {files.get_filename(i) for i in range(len(files))}
        for split, files in (("train", parts.train_set), ("val", parts.val_set))
    }
    assert {split: {r["path"] for r in rows if r["split"] == split} for split in drawn} == drawn
    assert all(Path(r["path"]).parent.name == r["label"] for r in rows)
    # dataset=csv reads the listing back as the same two splits
    again = make_cfg("dataset=csv", f"dataset.csv={listing}", f"dataset.root={flat}")
    for split, files in drawn.items():
        read = build_split(again.dataset, split, None, parts.classes)
        assert {read.get_filename(i) for i in range(len(read))} == files
