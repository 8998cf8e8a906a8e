"""ImageFolder listing with symlinks, as torchvision's ImageFolder lists the same folders:
links followed wherever they lead (class folders, files, a split of links), loops ended."""

from __future__ import annotations

import logging
import os
import shutil
from collections import Counter
from pathlib import Path

import pytest
from torchvision.datasets import DatasetFolder

from engine.data.datasets.imagefolder import ImageFolderDataset
from engine.data.decode import IMAGE_SUFFIXES

LOGGER = "engine.data.datasets.imagefolder"


@pytest.fixture
def tree(demo_dir: Path, tmp_path: Path) -> Path:
    root = tmp_path / "tree"
    shutil.copytree(demo_dir / "imagefolder", root)
    return root


def _listed(data: ImageFolderDataset) -> list[str]:
    return [data.get_filename(i) for i in range(len(data))]  # type: ignore[misc]


def _ours(root: Path, split: str = "train") -> Counter[tuple[str, str]]:
    data = ImageFolderDataset(str(root), split)
    return Counter(zip(_listed(data), (data.classes[t] for t in data.targets), strict=True))


def _torchvisions(root: Path, split: str = "train") -> Counter[tuple[str, str]]:
    """(path, class) of every sample torchvision's ImageFolder lists (our suffixes: theirs
    lack the phone formats)."""
    theirs = DatasetFolder(str(root / split), loader=str, extensions=IMAGE_SUFFIXES)
    return Counter((path, theirs.classes[label]) for path, label in theirs.samples)


def _images(folder: Path) -> list[Path]:
    return sorted(p for p in folder.iterdir() if p.suffix in (".jpg", ".png"))


def test_symlink_loop_neither_hangs_nor_duplicates(tree: Path, caplog) -> None:
    before = len(ImageFolderDataset(str(tree), "train"))
    circle = tree / "train" / "circle"
    (circle / "nested").mkdir()
    (circle / "nested" / "back_up").symlink_to(circle, target_is_directory=True)  # a loop
    (circle / "self").symlink_to(".", target_is_directory=True)  # another loop
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        data = ImageFolderDataset(str(tree), "train")
    assert len(data) == before
    assert len({os.path.realpath(p) for p in _listed(data)}) == before
    assert "did not enter 2 symlinks back to a folder they are in (a loop)" in caplog.text


def test_a_class_folder_linked_from_outside_the_split_is_a_class(
    tree: Path, tmp_path: Path
) -> None:
    """It was dropped: the model got one class fewer than torchvision's."""
    elsewhere = tmp_path / "elsewhere" / "ring"
    elsewhere.mkdir(parents=True)
    for image in _images(tree / "train" / "circle")[:3]:
        shutil.copy(image, elsewhere / image.name)
    (tree / "train" / "ring").symlink_to(elsewhere, target_is_directory=True)
    (tree / "train" / "cross" / "more.png").symlink_to(elsewhere / _images(elsewhere)[0].name)
    ours = _ours(tree)
    assert ours == _torchvisions(tree)
    assert "ring" in ImageFolderDataset(str(tree), "train").classes
    assert sum(n for (_, name), n in ours.items() if name == "ring") == 3


def test_a_split_of_links_only_is_read_as_torchvision_reads_it(tree: Path, tmp_path: Path) -> None:
    """A symlink farm (every file a link into a pool) stopped with "holds no images"."""
    farm = tmp_path / "farm"
    for split in ("train", "val"):
        for folder in (tree / split).iterdir():
            (farm / split / folder.name).mkdir(parents=True)
            for image in folder.iterdir():
                (farm / split / folder.name / image.name).symlink_to(image)
    assert _ours(farm) == _torchvisions(farm) and sum(_ours(farm).values()) == 48
    assert _ours(farm, "val") == _torchvisions(farm, "val")
    image, label = ImageFolderDataset(str(farm), "train")[0]  # read through the link
    assert image.ndim == 3 and label == 0


def test_a_file_linked_to_another_classs_file_is_listed_under_both_and_said(
    tree: Path, caplog
) -> None:
    """It was dropped without a word; torchvision lists it under both classes."""
    train = tree / "train"
    classes = sorted(p.name for p in train.iterdir())
    early = _images(train / classes[0])[0]
    (train / classes[-1] / "to_early.jpg").symlink_to(early)
    (train / classes[0] / "zz_again.jpg").symlink_to(early)  # upsampled within its class
    (train / classes[1] / "all_of_first").symlink_to(train / classes[0])  # a folder, not a loop
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        ours = _ours(tree)
    assert ours == _torchvisions(tree)
    assert ours[(str(train / classes[-1] / "to_early.jpg"), classes[-1])] == 1
    said = [r.getMessage() for r in caplog.records if "through a symlink" in r.getMessage()]
    assert len(said) == 1 and "under another class" in said[0]


def test_upper_case_suffixes_are_images(tree: Path) -> None:
    circle = tree / "train" / "circle"
    before = len(ImageFolderDataset(str(tree), "train"))
    for suffix, like in ((".JPG", ".jpg"), (".JPEG", ".jpg"), (".PNG", ".png")):
        source = sorted((tree / "train").glob(f"*/*{like}"))[0]
        shutil.copy(source, circle / f"upper{suffix}")
    assert len(ImageFolderDataset(str(tree), "train")) == before + 3
