"""ImageFolder layout: `root/{train,val}/<class>/<image>`; class = sub-folder name."""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from pathlib import Path

from src.data.datasets.files import LabelledImageFiles, Transform
from src.data.decode import IMAGE_SUFFIXES

log = logging.getLogger(__name__)


def _list_images(class_dir: Path) -> tuple[list[str], list[str]]:
    """Image files under `class_dir` (recursively, sorted) and the other files found."""
    images, others = [], []
    for dirpath, dirnames, filenames in os.walk(class_dir):
        dirnames.sort()
        for name in sorted(filenames):
            path = os.path.join(dirpath, name)
            (images if name.lower().endswith(IMAGE_SUFFIXES) else others).append(path)
    return images, others


class ImageFolderDataset(LabelledImageFiles):
    """One split of an ImageFolder tree; `classes` / `class_to_idx` follow the train split."""

    def __init__(
        self,
        root: str,
        split: str,
        transform: Transform | None = None,
        classes: Sequence[str] | None = None,
    ) -> None:
        split_dir = Path(root) / split
        if not split_dir.is_dir():
            raise FileNotFoundError(
                f"dataset.root: {split_dir} is not a directory. An ImageFolder root holds "
                f"train/<class>/*.jpg and val/<class>/*.jpg; set dataset.root to that folder."
            )
        found = sorted(entry.name for entry in os.scandir(split_dir) if entry.is_dir())
        if classes is None:
            classes = found
        unknown = sorted(set(found) - set(classes))
        if unknown:
            raise ValueError(
                f"dataset.root: {split_dir} has class folders {unknown} that the train split "
                f"does not have (train classes: {list(classes)}). Rename or remove them."
            )
        paths: list[str] = []
        targets: list[int] = []
        ignored: list[str] = []
        for label, name in enumerate(classes):
            if name not in found:
                log.warning("%s: no folder for class %r; it has no samples here", split_dir, name)
                continue
            images, others = _list_images(split_dir / name)
            if not images and split == "train":
                raise ValueError(
                    f"dataset.root: class folder {split_dir / name} holds no images with a "
                    f"suffix in {IMAGE_SUFFIXES}. Add images or remove the folder."
                )
            paths += images
            targets += [label] * len(images)
            ignored += others
        if not paths:
            raise ValueError(f"dataset.root: no images found under {split_dir}.")
        if ignored:
            log.warning(
                "%s: ignored %d files that are not images by suffix, e.g. %s",
                split_dir, len(ignored), ignored[0],
            )
        super().__init__(paths, targets, classes, transform)
