"""ImageFolder layout: `root/{train,val,test}/<class>/<image>`; class = sub-folder name (test/
is optional: only mode=eval eval.split=test reads it). Or `root/<class>/<image>` with
`dataset.val_fraction`: a stratified, seeded val split drawn from it."""

from __future__ import annotations

import logging
import os
import time
from array import array
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from engine.core.bounds import Seed, Split
from engine.core.text import shown
from engine.data.datasets.base import Transform
from engine.data.datasets.image_files import LabelledImageFiles
from engine.data.decode import IMAGE_SUFFIXES
from engine.data.decode_policy import DecodePolicy
from engine.data.holdout import held_out
from engine.data.listing import class_name, listed, unique_classes

log = logging.getLogger(__name__)

CHUNK = 65_536  # files listed between two conversions to a bytes array
REPORT_EVERY_S = 5.0  # seconds between progress lines while a large folder is listed


class FolderWalk:
    """Files below one split folder, sorted, as torchvision's ImageFolder lists them
    (os.walk(followlinks=True)): symlinked folders and files are followed wherever they lead,
    so a class folder linked in from elsewhere, a split of links (a symlink farm) and a file
    linked to another class's file are all listed. Only a loop differs: a link back to a
    folder the walk is inside is not entered, so each file of a loop is listed once (torchvision
    lists it again at every level, until the path is too long)."""

    def __init__(self, split_dir: Path, report_every_s: float = REPORT_EVERY_S) -> None:
        self.root = os.path.realpath(split_dir)
        self.listed = self.folders = 0  # for the progress line of a long listing
        self.started = self.reported = time.monotonic()
        self.report_every_s = report_every_s
        self.links = 0  # symlinks met (files can be listed twice only through them)
        self.loops: list[str] = []  # links not entered: "link -> the folder above it"
        self.ignored = 0  # files that are not images by suffix
        self.first_ignored = ""
        self._inside: set[str] = set()  # real paths of the folders now being walked

    def images(self, directory: str, real: str | None = None) -> list[str]:
        """Image files under `directory` (recursively; `real`: its real path, when known);
        the other files are counted."""
        images: list[str] = []
        self._visit(directory, images, real or os.path.realpath(directory))
        return images

    def _visit(self, directory: str, images: list[str], real_dir: str) -> None:
        entries = sorted(os.scandir(directory), key=lambda e: e.name)
        subdirs = []
        for entry in entries:
            linked = entry.is_symlink()
            self.links += linked
            try:
                is_dir = entry.is_dir()
            except OSError:  # a symlink loop: kept as a file, reported unreadable when read
                is_dir = False
            if is_dir:  # a real sub-folder's real path is known: no realpath() per folder
                real = (
                    os.path.realpath(entry.path) if linked else os.path.join(real_dir, entry.name)
                )
                subdirs.append((entry.path, real))
            elif entry.name.lower().endswith(IMAGE_SUFFIXES):
                images.append(entry.path)
            else:
                self.ignored += 1
                self.first_ignored = self.first_ignored or entry.path
        self.folders += 1
        self.listed += len(entries)
        now = time.monotonic()
        if now - self.reported >= self.report_every_s:
            self.reported = now
            log.info(
                "listing %s: %s entries in %s folders so far (%.0f s)",
                self.root,
                f"{self.listed:,}",
                f"{self.folders:,}",
                now - self.started,
            )
        self._inside.add(real_dir)
        for subdir, real in subdirs:
            if real in self._inside:  # a link back up: the loop ends here
                self.loops.append(f"{subdir} -> {real}")
            else:
                self._visit(subdir, images, real)
        self._inside.discard(real_dir)


def _same_files(paths: Sequence[str]) -> np.ndarray:
    """One id per distinct real file (-1: none, a dangling link), so that one file listed
    under two names (through symlinks) shares its id."""
    found: dict[tuple[int, int], int] = {}
    ids = np.full(len(paths), -1, dtype=np.int64)
    for i, path in enumerate(paths):
        try:
            info = os.stat(path)
        except OSError:
            continue
        ids[i] = found.setdefault((info.st_dev, info.st_ino), len(found))
    return ids


def warn_repeats(split_dir: Path, paths: Sequence[str], targets: np.ndarray) -> None:
    """One warning for files listed more than once through symlinks: as in torchvision each
    listing is a sample (how people upsample), but one file under two classes gets two labels,
    and that is rarely meant."""
    ids = _same_files(paths)
    known = ids >= 0
    order = np.lexsort((targets[known], ids[known]))
    sample_ids, labels = ids[known][order], targets[known][order]
    where = np.flatnonzero(known)[order]
    repeat = np.flatnonzero(sample_ids[1:] == sample_ids[:-1]) + 1
    if not len(repeat):
        return
    other = repeat[labels[repeat] != labels[repeat - 1]]
    first = other[0] if len(other) else repeat[0]
    a, b = paths[where[first - 1]], paths[where[first]]
    log.warning(
        "%s: %d listings are a file listed before through a symlink (%d of them under another "
        "class), e.g. %s and %s: as in torchvision each is a sample of its folder's class; "
        "remove the link if one file should not train twice or under two classes",
        split_dir,
        len(repeat),
        len(other),
        shown(a),
        shown(b),
    )


def _holds_splits(folder: Path) -> bool:
    return (folder / "train").is_dir() and (folder / "val").is_dir()


def _splits_near(root: Path) -> Path | None:
    """The folder one level up or down from `root` that holds train/ and val/, if one does: a
    root set one level too deep (photos/train) or too shallow (a folder holding photos/)."""
    if _holds_splits(root.parent) and root.parent != root:
        return root.parent
    if root.is_dir():
        below = [entry for entry in os.scandir(root) if entry.is_dir()]
        holding = [Path(e.path) for e in below[:64] if _holds_splits(Path(e.path))]
        if len(holding) == 1:
            return holding[0]
    return None


def split_folder(root: Path, split: str, val_fraction: float | None) -> Path:
    """The folder the split's class folders are in: root/<split>, or root itself when the val
    split is drawn (`val_fraction`); a root of the other layout is refused with the fix."""
    if val_fraction is not None:
        if split == "test":
            raise FileNotFoundError(
                f"dataset.val_fraction={val_fraction} draws train and val from the class folders "
                f"of {root}, which has no test split: evaluate eval.split=val, or lay out "
                "root/{train,val,test}/<class>/* with dataset.val_fraction=null."
            )
        held = [name for name in ("train", "val") if (root / name).is_dir()]
        if held:
            folders = " and ".join(f"{name}/" for name in held)
            raise ValueError(
                f"dataset.val_fraction={val_fraction}: {root} holds {folders}, the layout of "
                "ready-made splits: set dataset.val_fraction=null to read them, or set "
                f"dataset.root={root / held[0]} to draw val from its class folders."
            )
        if not root.is_dir():
            raise FileNotFoundError(
                f"dataset.root: {root} is not a directory; with dataset.val_fraction set it holds "
                "the class folders (root/<class>/*.jpg)."
            )
        return root
    split_dir = root / split
    if not split_dir.is_dir() and split == "test":
        raise FileNotFoundError(
            f"dataset.root: {split_dir} is not a directory, so this root has no test split "
            "(test/<class>/*.jpg): add that folder, or evaluate eval.split=val."
        )
    if not split_dir.is_dir() and (near := _splits_near(root)) is not None:
        raise FileNotFoundError(
            f"dataset.root={root} has no {split}/ (did you mean dataset.root={near}? it holds "
            "train/ and val/)."
        )
    folders = sorted(e.name for e in os.scandir(root) if e.is_dir()) if root.is_dir() else []
    if not split_dir.is_dir() and folders and split != "test":
        shown = ", ".join(f"{name}/" for name in folders[:5]) + (
            ", ..." if len(folders) > 5 else ""
        )
        raise FileNotFoundError(
            f"dataset.root={root} holds {len(folders)} folders ({shown}) but no {split}/: if they "
            "are the classes, set dataset.val_fraction=0.2 to hold out a val split from them; "
            "else set dataset.root to the folder holding train/ and val/."
        )
    if not split_dir.is_dir():
        raise FileNotFoundError(
            f"dataset.root: {split_dir} is not a directory. An ImageFolder root holds "
            "train/<class>/*.jpg and val/<class>/*.jpg; set dataset.root to that folder, or, "
            "for a folder of class folders (root/<class>/*.jpg), set dataset.val_fraction "
            "(e.g. 0.2) to hold out a val split drawn from it."
        )
    return split_dir


def class_folders(split_dir: Path, walk: FolderWalk) -> dict[str, list[tuple[str, str | None]]]:
    """Class name -> its folders in `split_dir`, each (its name as spelled on disk, its real
    path or None: a link, resolved by the walk). A folder's class is its name as a class name
    (listing.class_name: NFC), so two folders spelling one name apart (NFC and NFD `café`)
    are one class, said in a warning; each is read as it is spelled. Two that differ only in
    spaces at their ends (`cat`, `cat `) are refused: reports would show two classes alike."""
    folders: dict[str, list[tuple[str, str | None]]] = {}
    for entry in sorted(os.scandir(split_dir), key=lambda e: e.name):
        if entry.is_dir():  # a link to a folder anywhere too, as in torchvision
            where = f"{shown(entry.path)} (a class folder under dataset.root)"
            name = class_name(entry.name, lambda where=where: where, "rename the folder")
            real = None if entry.is_symlink() else os.path.join(walk.root, entry.name)
            folders.setdefault(name, []).append((entry.name, real))
    by_ends: dict[str, str] = {}
    for name in folders:  # `cat` and `cat ` print alike in every report: refused, not merged
        other = by_ends.setdefault(name.strip(), name)
        if other != name:
            raise ValueError(
                f"{shown(split_dir)}: the class folders {other!a} and {name!a} differ only in "
                "spaces at their ends, so every report would show two classes alike; rename "
                "or merge them (dataset.root)."
            )
    for name, spellings in folders.items():
        if len(spellings) > 1:
            log.warning(
                "%s: the class folders %s are one class %r (class names are compared in "
                "Unicode NFC); each folder is read as it is spelled",
                split_dir,
                ", ".join(ascii(folder) for folder, _ in spellings),
                name,
            )
    return folders


def list_classes(
    split_dir: Path, strict: bool, classes: Sequence[str] | None
) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """(paths as a bytes array, labels, classes) of the images in the class folders of
    `split_dir`; `classes` None: the folders' class names, sorted. `strict`: an empty class
    folder is an error (the train split)."""
    walk = FolderWalk(split_dir)
    folders = class_folders(split_dir, walk)
    found = sorted(folders)
    if classes is None:
        classes = found
    unknown = sorted(set(found) - set(classes))
    if unknown:
        raise ValueError(
            f"dataset.root: {split_dir} has class folders {listed(unknown)} that the train split "
            f"does not have (train classes: {listed(classes)}). Rename or remove them."
        )
    # paths encoded as they are listed, into a bytes array every CHUNK files: no Python
    # object per file outlives its chunk
    chunks: list[np.ndarray] = []
    encoded: list[bytes] = []
    targets = array("q")
    missing = []
    for label, name in enumerate(classes):
        if name not in folders:  # a dict: linear in the classes (100,000 of them)
            missing.append(name)
            continue
        images = [
            image
            for folder, real in folders[name]
            for image in walk.images(os.path.join(split_dir, folder), real)
        ]
        if not images and strict:
            raise ValueError(
                f"dataset.root: class folder {split_dir / folders[name][0][0]} holds no images "
                f"with a suffix in {IMAGE_SUFFIXES}. Add images or remove the folder."
            )
        encoded += map(os.fsencode, images)
        targets.extend([label] * len(images))
        if len(encoded) >= CHUNK:
            chunks.append(np.array(encoded, dtype=np.bytes_))
            encoded = []
    chunks.append(np.array(encoded, dtype=np.bytes_))
    if missing:
        log.warning(
            "%s: no folder for %d of the %d classes (%s); they have no samples here",
            split_dir,
            len(missing),
            len(classes),
            listed(missing),
        )
    if not targets:
        raise ValueError(f"dataset.root: no images found under {split_dir}.")
    if walk.ignored:
        log.warning(
            "%s: ignored %d files that are not images by suffix, e.g. %s",
            split_dir,
            walk.ignored,
            walk.first_ignored,
        )
    if walk.loops:
        log.warning(
            "%s: did not enter %d symlinks back to a folder they are in (a loop), e.g. %s",
            split_dir,
            len(walk.loops),
            walk.loops[0],
        )
    paths, labels = np.concatenate(chunks), np.frombuffer(targets, dtype=np.int64)
    if walk.links:  # only a link lists a file twice: no stat() per file of a plain tree
        warn_repeats(split_dir, [os.fsdecode(p) for p in paths], labels)
    return paths, labels, list(classes)


class ImageFolderDataset(LabelledImageFiles):
    """One split of an ImageFolder tree; `classes` / `class_to_idx` follow the train split.

    With `val_fraction`, root holds the class folders themselves and the val split is that
    share of each class, drawn from `split_seed` (engine/data/holdout.py); the run lists the
    draw in split.csv."""

    splits = ("train", "val", "test")

    def __init__(
        self,
        root: str,
        split: str,
        transform: Transform | None = None,
        classes: Sequence[str] | None = None,
        decode: DecodePolicy | None = None,
        val_fraction: Split | None = None,
        split_seed: Seed = 0,
    ) -> None:
        if classes is not None:  # dataset.classes, or the train split's (val, test)
            classes = unique_classes(classes)
        folder = split_folder(Path(root), split, val_fraction)
        drawn = val_fraction is not None
        paths, targets, classes = list_classes(folder, drawn or split == "train", classes)
        if drawn:
            val = held_out(targets, val_fraction, split_seed)
            keep = val if split == "val" else ~val
            paths, targets = paths[keep], targets[keep]
        self.drawn_split = drawn
        super().__init__(
            paths,
            targets,
            classes,
            transform,
            decode,
        )
