"""ImageFolder layout: `root/{train,val,test}/<class>/<image>`; class = sub-folder name (test/
is optional: only mode=eval eval.split=test reads it)."""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from pathlib import Path

from src.data.datasets.base import Transform
from src.data.datasets.image_files import LabelledImageFiles
from src.data.decode import IMAGE_SUFFIXES
from src.data.image_header import PILLOW_MAX_PIXELS

log = logging.getLogger(__name__)


class FolderWalk:
    """Files below one split folder, sorted. Symlinks are followed only when they resolve
    inside the split folder, and each real file and folder is visited once (no loops)."""

    def __init__(self, split_dir: Path) -> None:
        self.root = os.path.realpath(split_dir)
        self.outside: list[str] = []  # links not followed: "link -> target"
        self._dirs: set[str] = set()
        self._files: set[str] = set()

    def inside(self, path: str) -> bool:
        """Whether `path` resolves inside the split folder (recorded as skipped if not)."""
        real = os.path.realpath(path)
        if os.path.commonpath([self.root, real]) == self.root:
            return True
        self.outside.append(f"{path} -> {real}")
        return False

    def list(self, directory: str) -> tuple[list[str], list[str]]:
        """Image files under `directory` (recursively) and the other files found."""
        images: list[str] = []
        others: list[str] = []
        self._visit(directory, images, others)
        return images, others

    def _visit(self, directory: str, images: list[str], others: list[str]) -> None:
        real_dir = os.path.realpath(directory)
        if real_dir in self._dirs:  # a loop, or a second link to the same folder
            return
        self._dirs.add(real_dir)
        entries = sorted(os.scandir(directory), key=lambda e: e.name)
        subdirs = []
        for entry in entries:
            if entry.is_symlink() and not self.inside(entry.path):
                continue
            try:
                is_dir = entry.is_dir()
            except OSError:  # a symlink loop: kept as a file, reported unreadable when read
                is_dir = False
            if is_dir:
                subdirs.append(entry.path)
                continue
            real = (
                os.path.realpath(entry.path)
                if entry.is_symlink()
                else os.path.join(real_dir, entry.name)
            )
            if real in self._files:  # the same file reached twice, through a link
                continue
            self._files.add(real)
            (images if entry.name.lower().endswith(IMAGE_SUFFIXES) else others).append(entry.path)
        for subdir in subdirs:
            self._visit(subdir, images, others)


class ImageFolderDataset(LabelledImageFiles):
    """One split of an ImageFolder tree; `classes` / `class_to_idx` follow the train split."""

    splits = ("train", "val", "test")

    def __init__(
        self,
        root: str,
        split: str,
        transform: Transform | None = None,
        classes: Sequence[str] | None = None,
        on_error: str = "raise",
        max_bad_fraction: float = 0.01,
        reduced_decode: bool = True,
        max_image_pixels: int | None = PILLOW_MAX_PIXELS,
    ) -> None:
        split_dir = Path(root) / split
        if not split_dir.is_dir() and split == "test":
            raise FileNotFoundError(
                f"dataset.root: {split_dir} is not a directory, so this root has no test split "
                "(test/<class>/*.jpg): add that folder, or evaluate eval.split=val."
            )
        if not split_dir.is_dir():
            raise FileNotFoundError(
                f"dataset.root: {split_dir} is not a directory. An ImageFolder root holds "
                f"train/<class>/*.jpg and val/<class>/*.jpg; set dataset.root to that folder."
            )
        walk = FolderWalk(split_dir)
        found = sorted(
            entry.name
            for entry in os.scandir(split_dir)
            if entry.is_dir() and (not entry.is_symlink() or walk.inside(entry.path))
        )
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
            images, others = walk.list(os.path.join(split_dir, name))
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
                split_dir,
                len(ignored),
                ignored[0],
            )
        if walk.outside:
            log.warning(
                "%s: did not follow %d symlinks that lead outside it, e.g. %s",
                split_dir,
                len(walk.outside),
                walk.outside[0],
            )
        super().__init__(
            paths,
            targets,
            classes,
            transform,
            on_error,
            max_bad_fraction,
            reduced_decode,
            max_image_pixels,
        )
