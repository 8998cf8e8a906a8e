"""ImageFolder listing with symlinks: no loops, nothing outside the split, each real file once."""

from __future__ import annotations

import logging
import os
import shutil
from pathlib import Path

import pytest

from engine.data.datasets.imagefolder import ImageFolderDataset


@pytest.fixture
def tree(demo_dir: Path, tmp_path: Path) -> Path:
    root = tmp_path / "tree"
    shutil.copytree(demo_dir / "imagefolder", root)
    return root


def _listed(data: ImageFolderDataset) -> list[str]:
    return [data.get_filename(i) for i in range(len(data))]


def test_symlink_loop_neither_hangs_nor_duplicates(tree: Path) -> None:
    before = len(ImageFolderDataset(str(tree), "train"))
    circle = tree / "train" / "circle"
    (circle / "nested").mkdir()
    (circle / "nested" / "back_up").symlink_to(circle, target_is_directory=True)  # a loop
    (circle / "self").symlink_to(".", target_is_directory=True)  # another loop
    data = ImageFolderDataset(str(tree), "train")
    assert len(data) == before
    assert len({os.path.realpath(p) for p in _listed(data)}) == before


def test_the_same_real_file_twice_is_listed_once(tree: Path) -> None:
    before = len(ImageFolderDataset(str(tree), "train"))
    circle = tree / "train" / "circle"
    first = sorted(circle.glob("*.jpg"))[0]
    (circle / "zz_copy.jpg").symlink_to(first)
    (tree / "train" / "cross" / "circles").symlink_to(circle, target_is_directory=True)
    data = ImageFolderDataset(str(tree), "train")
    assert len(data) == before
    assert _listed(data).count(str(first)) == 1


def test_links_leading_outside_the_split_are_not_followed(tree: Path, tmp_path: Path, caplog):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    shutil.copy(sorted((tree / "train" / "circle").glob("*.jpg"))[0], elsewhere / "x.jpg")
    val_circle = tree / "val" / "circle"
    before = len(ImageFolderDataset(str(tree), "val"))
    (val_circle / "outside.jpg").symlink_to(elsewhere / "x.jpg")
    (val_circle / "outside_dir").symlink_to(elsewhere, target_is_directory=True)
    train_file = sorted((tree / "train" / "circle").glob("*.jpg"))[0]
    (val_circle / "from_train.jpg").symlink_to(train_file)  # another split: a leak
    with caplog.at_level(logging.WARNING, logger="engine.data.datasets.imagefolder"):
        data = ImageFolderDataset(str(tree), "val")
    assert len(data) == before
    links = {"outside.jpg", "x.jpg", "from_train.jpg"}
    assert not any(Path(p).name in links for p in _listed(data))
    warned = [r.getMessage() for r in caplog.records if "symlinks" in r.getMessage()]
    assert len(warned) == 1 and "did not follow 3 symlinks" in warned[0]
    assert str(val_circle) in warned[0]


def test_upper_case_suffixes_are_images(tree: Path) -> None:
    circle = tree / "train" / "circle"
    before = len(ImageFolderDataset(str(tree), "train"))
    for suffix, like in ((".JPG", ".jpg"), (".JPEG", ".jpg"), (".PNG", ".png")):
        source = sorted((tree / "train").glob(f"*/*{like}"))[0]
        shutil.copy(source, circle / f"upper{suffix}")
    assert len(ImageFolderDataset(str(tree), "train")) == before + 3


def test_a_link_across_class_folders_keeps_the_first_visit(tree: Path) -> None:
    before = len(ImageFolderDataset(str(tree), "train"))
    train = tree / "train"
    classes = sorted(p.name for p in train.iterdir())
    early, late = (sorted((train / c).glob("*.jpg"))[0] for c in (classes[0], classes[-1]))
    (train / classes[1] / "to_early.jpg").symlink_to(early)  # listed already: skipped
    (train / classes[0] / "zz_to_late.jpg").symlink_to(late)  # first: the late file is skipped
    data = ImageFolderDataset(str(tree), "train")
    listed = _listed(data)
    assert len(data) == before and len({os.path.realpath(p) for p in listed}) == before
    assert str(train / classes[0] / "zz_to_late.jpg") in listed and str(late) not in listed
    assert data.targets[listed.index(str(train / classes[0] / "zz_to_late.jpg"))] == 0
