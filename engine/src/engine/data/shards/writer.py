"""Writing WebDataset tar shards (mode=shards): one split's samples into
`{split}-NNNNNN.tar` (or `.tar.gz`) files of at most `max_samples` each, as
`KEY.<image ext>`, `KEY.cls` and `KEY.json` members, with the manifest entry of each shard.

A folder being written holds `shards.writing` from the first shard until the manifest is in
place: a lock (one writer at a time), the record of the files the write makes, and a mark that
the set is unfinished; the manifest says it is mode=shards' (`written_by`). A later write
replaces only the files one of these records as its own. A write cut short
(kill -9, a full disk) leaves it behind, so neither a training (engine/data/shards/counts.py)
nor a rerun takes a half-written set for a whole one."""

from __future__ import annotations

import io
import json
import re
import tarfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from engine.core import folder_lock
from engine.core.io import write_error
from engine.data.shards.manifest import NAME, load
from engine.data.shards.remote import Network

WRITING = "shards.writing"
SHARD_NAME = re.compile(r"(train|val)-\d{6}\.tar(\.gz)?")  # the names SplitWriter writes
EXTRA = (NAME, "classes.txt")  # what mode=shards writes beside the tar shards
WRITTEN_BY = "mode=shards"  # the mark in the manifest mode=shards writes
ELSEWHERE = "the shards elsewhere (another shards.dir)"


def _add(tar: tarfile.TarFile, name: str, data: bytes) -> None:
    info = tarfile.TarInfo(name)
    info.size, info.mode = len(data), 0o644
    tar.addfile(info, io.BytesIO(data))


class SplitWriter:
    """One split's samples into `{split}-NNNNNN.tar[.gz]` files of `max_samples` each (gzip
    with `compress`); the manifest entry of each shard it closed in `entries`."""

    def __init__(self, folder: Path, split: str, max_samples: int, compress: bool) -> None:
        self.folder, self.split = folder, split
        self.max_samples, self.compress = max_samples, compress
        self.entries: dict[str, dict] = {}
        self.tar: tarfile.TarFile | None = None
        self.labels: list[int] = []

    def add(self, key: str, image: bytes, ext: str, label: int, meta: dict) -> None:
        """Sample `key`: its image (`ext`: jpg, png, webp), class index and JSON metadata."""
        try:
            if self.tar is None:
                suffix = ".tar.gz" if self.compress else ".tar"
                self.name = f"{self.split}-{len(self.entries):06d}{suffix}"
                mode = "w:gz" if self.compress else "w"
                kwargs = {"compresslevel": 6} if self.compress else {}
                self.tar = tarfile.open(self.folder / self.name, mode, **kwargs)  # noqa: SIM115
            _add(self.tar, f"{key}.{ext}", image)
            _add(self.tar, f"{key}.cls", str(label).encode())
            _add(self.tar, f"{key}.json", json.dumps(meta).encode())
        except OSError as err:
            raise write_error(err, self.folder / self.name, ELSEWHERE) from err
        self.labels.append(label)
        if len(self.labels) == self.max_samples:
            self.close()

    def close(self) -> None:
        """Finish the open shard (if any) and record its manifest entry."""
        if self.tar is None:
            return
        try:
            self.tar.close()
        except OSError as err:
            raise write_error(err, self.folder / self.name, ELSEWHERE) from err
        stat = (self.folder / self.name).stat()
        self.entries[self.name] = {
            "samples": len(self.labels),
            "labels": self.labels,
            "label_from": "cls",
            "errors": [],
            "size": stat.st_size,
            "mtime_ns": stat.st_mtime_ns,
        }
        self.tar, self.labels = None, []


def shard_names(split: str, count: int, max_samples: int, compress: bool) -> list[str]:
    """The shards SplitWriter writes for `count` samples of `split`."""
    suffix = ".tar.gz" if compress else ".tar"
    return [f"{split}-{i:06d}{suffix}" for i in range(-(-count // max_samples))]


def recorded_files(folder: Path) -> set[str]:
    """The files a finished mode=shards write left in `folder`, as its manifest records them:
    the shards it lists (of the names SplitWriter writes), the manifest and classes.txt. A
    manifest another writer wrote (webdataset users', the CLI's) records none."""
    try:
        manifest = load(str(folder / NAME), Network())
    except ValueError:  # not a manifest of this project: someone else's file
        return set()
    if manifest.written_by != WRITTEN_BY:
        return set()
    return {name for name in manifest.entries if SHARD_NAME.fullmatch(name)} | set(EXTRA)


def _recorded_writes(marker: Path, names: re.Pattern[str], extra: tuple[str, ...]) -> set[str]:
    """The files the write whose lock file `marker` is had planned (a write cut short)."""
    if not marker.exists():
        return set()
    writes = folder_lock.read_holder(marker).get("writes", [])
    return {w for w in writes if names.fullmatch(w) or w in extra}


@contextmanager
def writing(
    folder: Path,
    overwrite: bool,
    planned: list[str],
    names: re.Pattern[str] = SHARD_NAME,
    extra: tuple[str, ...] = EXTRA,
    recorded: Callable[[Path], set[str]] = recorded_files,
) -> Iterator[None]:
    """Around a mode=shards write of the files `planned` into `folder`: lock it
    (shards.writing, which records `planned`), refuse (or with shards.overwrite, remove) the
    files an earlier write left there, finished or not; at the end remove the mark, or keep it
    when the write failed (the set is unfinished). A writer's own files are those its lock
    recorded, or a finished set's record (`recorded`: the manifest of tar shards, the mark in
    each Parquet file) lists; another file of its names there (`names`: train-NNNNNN.tar;
    `extra`: shards.json, classes.txt) is someone else's: refused, never replaced."""
    marker = folder / WRITING
    unfinished = marker.exists()
    earlier = _recorded_writes(marker, names, extra)
    ours = earlier | recorded(folder)
    present = sorted(
        path.name
        for path in folder.iterdir()
        if names.fullmatch(path.name) or path.name in (*extra, *planned)
    )
    foreign = [name for name in present if name not in ours]
    if foreign:
        raise FileExistsError(
            f"shards.dir: {folder} holds {foreign[0]}, which no mode=shards run recorded as its "
            f"own ({NAME}, {WRITING}): mode=shards replaces only files it wrote itself; move "
            "it, or choose another shards.dir."
        )
    try:
        before = folder_lock.hold(marker, writes=sorted(earlier | set(planned)))
    except folder_lock.FolderBusy as busy:
        raise FileExistsError(
            f"shards.dir: {folder} is being written by another mode=shards run ({busy.holder}): "
            "wait for it to end, or set shards.dir to another folder."
        ) from None
    mine = [folder / name for name in present]
    if mine and not overwrite:
        folder_lock.release(marker, remove=not unfinished)
        held = (
            f"an unfinished set of shards (the write of {folder_lock.describe(before or {})} "
            "was cut short)"
            if unfinished
            else f"shards ({mine[0].name}, ...)"
        )
        raise FileExistsError(
            f"shards.dir: {folder} already holds {held}; set shards.overwrite=true to replace "
            "them, or choose another shards.dir."
        )
    for path in mine:
        path.unlink()
    try:
        yield
    except BaseException:
        folder_lock.release(marker)  # the mark stays: the set is unfinished
        raise
    folder_lock.release(marker, remove=True)


def unfinished_write(folder: Path) -> str | None:
    """Why the shards in local `folder` must not be read yet, or None: a mode=shards write is
    still going on there, or was cut short."""
    marker = folder / WRITING
    if not marker.exists():
        return None
    holder = folder_lock.describe(folder_lock.read_holder(marker))
    if folder_lock.is_held(marker):
        return f"{folder} is being written by mode=shards now ({holder}): wait for it to end"
    return (
        f"{folder} holds an unfinished set of shards: the mode=shards run that wrote them "
        f"({holder}) was cut short; write them again with mode=shards shards.overwrite=true"
    )


def brace_pattern(folder: Path, split: str, entries: dict[str, dict]) -> str | None:
    """`folder/train-{000000..000041}.tar`: the brace pattern of one split's shards."""
    names = sorted(name for name in entries if name.startswith(f"{split}-"))
    if not names:
        return None
    suffix = names[0].removeprefix(f"{split}-000000")
    return f"{folder}/{split}-{{000000..{len(names) - 1:06d}}}{suffix}"
