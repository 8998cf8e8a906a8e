"""dataset=imagefolder with dataset.val_fraction: a root of class folders split per class, from
a seed, the draw listed in split.csv (which dataset=csv reads back), and the layouts that do
not fit refused with the fix."""

from __future__ import annotations

import csv
import shutil
from collections import Counter
from pathlib import Path

import pytest

from engine.api import assemble
from engine.data.datasets.imagefolder import ImageFolderDataset
from engine.data.splits import build_split
from engine_dev.demo import CLASSES


@pytest.fixture
def flat(demo_dir: Path, tmp_path: Path) -> Path:
    """root/<class>/*: the demo's train images, without train/ and val/."""
    return Path(shutil.copytree(demo_dir / "imagefolder" / "train", tmp_path / "flat"))


def _split(root: Path, fraction: float, seed: int = 0) -> tuple[list[str], list[str]]:
    train = ImageFolderDataset(str(root), "train", val_fraction=fraction, split_seed=seed)
    val = ImageFolderDataset(
        str(root), "val", classes=train.classes, val_fraction=fraction, split_seed=seed
    )
    assert train.classes == val.classes == list(CLASSES)
    names = [[d.get_filename(i) for i in range(len(d))] for d in (train, val)]
    labels = [Counter(Path(p).parent.name for p in files) for files in names]
    for name in CLASSES:  # every class keeps its share in val (stratified), and some train
        total = labels[0][name] + labels[1][name]
        assert labels[1][name] >= 1 and labels[0][name] >= 1
        assert abs(labels[1][name] - fraction * total) <= 0.5
    return names[0], names[1]


def test_val_fraction_holds_out_a_seeded_share_of_each_class(flat: Path) -> None:
    train, val = _split(flat, 0.25)
    everything = sorted(str(p) for p in flat.rglob("*") if p.is_file())
    assert not set(train) & set(val) and sorted(train + val) == everything
    assert _split(flat, 0.25) == (train, val)  # the same seed: the same split
    assert _split(flat, 0.25, seed=1)[1] != val


def test_a_root_with_train_and_val_and_a_fraction_is_refused(demo_dir: Path) -> None:
    root = demo_dir / "imagefolder"
    with pytest.raises(ValueError, match=r"holds train/ and val/.*set dataset\.val_fraction=null"):
        ImageFolderDataset(str(root), "train", val_fraction=0.2)


def test_a_root_of_class_folders_without_a_fraction_names_the_key(flat: Path) -> None:
    classes = r"flat holds 5 folders \(circle/, cross/, .*\) but no train/: if they are the classes"
    with pytest.raises(FileNotFoundError, match=classes + r", set dataset\.val_fraction=0\.2"):
        ImageFolderDataset(str(flat), "train")


def test_a_drawn_split_has_no_test_split(flat: Path) -> None:
    with pytest.raises(FileNotFoundError, match=r"no test split: evaluate eval\.split=val"):
        ImageFolderDataset(str(flat), "test", val_fraction=0.2)


def test_imagefolder_val_fraction_lists_its_draw_in_split_csv(
    reference_cfg, demo_dir, tmp_path
) -> None:
    flat = shutil.copytree(demo_dir / "imagefolder" / "train", tmp_path / "flat")  # root/<class>/*
    cfg = reference_cfg(
        "run", f"dataset.root={flat}", "dataset.val_fraction=0.25", "dataset.split_seed=3"
    )
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
    again = reference_cfg(
        "again",
        "dataset=csv",
        "dataset.train_csv=null",
        "dataset.val_csv=null",
        f"dataset.csv={listing}",
        f"dataset.root={flat}",
    )
    for split, files in drawn.items():
        read = build_split(again.dataset, split, None, parts.classes)
        assert {read.get_filename(i) for i in range(len(read))} == files
