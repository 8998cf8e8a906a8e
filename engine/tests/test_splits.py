"""The splits a dataset kind reads: test splits (asked for by mode=eval only), a CSV listing
given on its own, and the fixed class-spread sample of a limited validation. On the reference
project's dataset options (imagefolder, csv)."""

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
# dataset=csv with one listing: the reference option names the demo's train and val listings
ONE_LISTING = ("dataset=csv", "dataset.train_csv=null", "dataset.val_csv=null")


def _with_test_folder(demo_dir: Path, tmp_path: Path) -> Path:
    """A copy of the demo ImageFolder root whose test/ is a copy of val/."""
    root = tmp_path / "imagefolder"
    shutil.copytree(demo_dir / "imagefolder", root)
    shutil.copytree(root / "val", root / "test")
    return root


def test_imagefolder_reads_test_only_when_asked(reference_cfg, demo_dir: Path, tmp_path) -> None:
    root = _with_test_folder(demo_dir, tmp_path)
    cfg = reference_cfg("run", f"dataset.root={root}")
    test = build_split(cfg.dataset, "test", None, CLASSES)
    assert len(test) == 30 and test.classes == CLASSES
    assert "/test/" in test.get_filename(0)
    plain = reference_cfg("plain")  # the demo root has no test/: training never looks for it
    parts = assemble(plain)
    assert len(parts.val_set) == 30
    with pytest.raises(InstantiationException, match=r"no test split .*eval\.split=val"):
        build_split(plain.dataset, "test", None, CLASSES)


def test_csv_test_split_from_test_csv_or_split_column(
    reference_cfg, demo_dir: Path, tmp_path
) -> None:
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
    one = reference_cfg("one", *ONE_LISTING, f"dataset.csv={listing}", root)
    assert len(build_split(one.dataset, "test", None, CLASSES)) == 30
    two = reference_cfg("two", "dataset=csv", f"dataset.test_csv={demo_dir / 'val.csv'}")
    assert len(build_split(two.dataset, "test", None, CLASSES)) == 30
    with pytest.raises(InstantiationException, match=r"dataset\.test_csv is null"):
        build_split(reference_cfg("none", "dataset=csv").dataset, "test", None, CLASSES)


def test_csv_listing_on_its_own_trains_and_both_listings_are_refused(
    reference_cfg, demo_dir
) -> None:
    one = reference_cfg("one", *ONE_LISTING, f"dataset.csv={demo_dir / 'samples.csv'}")
    assert len(instantiate(without_fold_keys(one.dataset), split="train")) == 48
    both = reference_cfg(
        "both",
        "dataset=csv",
        f"dataset.csv={demo_dir / 'samples.csv'}",
        f"dataset.train_csv={demo_dir / 'train.csv'}",
        f"dataset.val_csv={demo_dir / 'val.csv'}",
    )
    with pytest.raises(InstantiationException, match=r"set either dataset\.train_csv"):
        instantiate(without_fold_keys(both.dataset), split="train")


def test_limited_validation_is_spread_over_the_classes(reference_cfg) -> None:
    # 2 val batches; the val set is sorted by class (6 of each of 5)
    parts = assemble(reference_cfg("run", "trainer.limit_val_batches=2", "loader.batch_size=8"))
    labels = torch.cat([labels for _, labels in parts.val_loader])
    assert len(labels) == 16
    counts = Counter(labels.tolist())
    assert sorted(counts) == [0, 1, 2, 3, 4] and max(counts.values()) - min(counts.values()) <= 1
    again = torch.cat([labels for _, labels in parts.val_loader])
    assert torch.equal(labels, again)  # the same sample every epoch
