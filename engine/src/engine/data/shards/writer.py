"""Writing WebDataset tar shards (mode=shards): one split's samples into
`{split}-NNNNNN.tar` (or `.tar.gz`) files of at most `max_samples` each, as
`KEY.<image ext>`, `KEY.cls` and `KEY.json` members, with the manifest entry of each shard.

shards.dir is the writer's own folder (engine/core/folder_mark.py): its mark `.shards.lock`
names mode=shards and lists the files the writes there made, before the first byte; a later
write replaces only those. The mark is also the lock (one writer at a time), and its record
says `writing: true` from before the first shard until the set is whole (the manifest in
place), so a write cut short (kill -9, a full disk) leaves a set that neither a training
(engine/data/shards/counts.py) nor a rerun takes for a whole one. A set an earlier engine
wrote has no mark: its own records say it is mode=shards' (the manifest's `written_by`, each
Parquet file's footer, the `shards.writing` a cut write left)."""

from __future__ import annotations

import io
import json
import os
import re
import tarfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from engine.core import folder_lock, folder_mark
from engine.core.io import write_error
from engine.data.shards.manifest import NAME, load
from engine.data.shards.remote import Network

MARK = folder_mark.SHARDS  # the writer's mark and lock in shards.dir
WRITER = "mode=shards"
OLD_MARK = "shards.writing"  # an earlier engine's lock, left by a write it cut short
SHARD_NAME = re.compile(r"(train|val)-\d{6}\.tar(\.gz)?")  # the names SplitWriter writes
EXTRA = (NAME, "classes.txt")  # what mode=shards writes beside the tar shards
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
    """The files a finished write of an earlier engine left in unmarked `folder`, as its
    manifest records them (`written_by: mode=shards`): the shards it lists (of the names
    SplitWriter writes), the manifest and classes.txt. Another writer's manifest (webdataset
    users', the CLI's) records none."""
    try:
        manifest = load(str(folder / NAME), Network())
    except ValueError:  # not a manifest of this project: someone else's file
        return set()
    if manifest.written_by != WRITER:
        return set()
    return {name for name in manifest.entries if SHARD_NAME.fullmatch(name)} | set(EXTRA)


def _earlier(folder: Path, recorded: Callable[[Path], set[str]]) -> frozenset[str]:
    """What an earlier engine's write left in unmarked `folder` as its own: a finished set's
    records (`recorded`), or the files a cut write's `shards.writing` planned."""
    if os.path.lexists(folder / MARK):
        return frozenset()
    old = folder / OLD_MARK
    planned = folder_lock.read_holder(old).get("writes", []) if old.is_file() else []
    return frozenset({*recorded(folder), *planned, *([OLD_MARK] if old.is_file() else [])})


@contextmanager
def writing(
    folder: Path,
    overwrite: bool,
    planned: list[str],
    names: re.Pattern[str] = SHARD_NAME,
    extra: tuple[str, ...] = EXTRA,
    recorded: Callable[[Path], set[str]] = recorded_files,
) -> Iterator[None]:
    """Around a mode=shards write of the files `planned` into `folder`, its own
    (engine/core/folder_mark.py): refuse a folder whose files of the writer's names (`names`:
    train-NNNNNN.tar; `extra`: shards.json, classes.txt) its mark does not list, or another
    writer's; refuse (or with shards.overwrite, remove) what an earlier write left, finished or
    not; claim the folder (`writing: true`) and, when the write ends whole, say so in the mark.
    A failed write leaves `writing: true`: the set is unfinished."""
    mark = folder / MARK
    present = {p.name for p in folder.iterdir() if names.fullmatch(p.name) or p.name in extra}
    ours = _earlier(folder, recorded)
    files = frozenset({*planned, *present})
    problem = folder_mark.owner_problem(folder, MARK, WRITER, files, ours, beside=True)
    if problem is not None:
        raise FileExistsError(f"shards.dir: {problem}; move it, or choose another shards.dir.")
    record = folder_lock.read_holder(mark) if mark.is_file() else {}
    listed = ({*record.get("files", []), *ours} & {*os.listdir(folder)}) - {MARK}
    mine = sorted(listed | present)
    if folder_lock.is_held(mark):
        raise FileExistsError(
            f"shards.dir: {folder} is being written by another mode=shards run "
            f"({folder_lock.describe(record)}): wait for it to end, or set shards.dir to "
            "another folder."
        )
    if mine and not overwrite:
        cut = record if record.get("writing") else folder_lock.read_holder(folder / OLD_MARK)
        held = (
            f"an unfinished set of shards (the write of {folder_lock.describe(cut)} was cut short)"
            if record.get("writing") or OLD_MARK in mine
            else f"shards ({', '.join(mine[:2])}, ...)"
        )
        raise FileExistsError(
            f"shards.dir: {folder} already holds {held}; set shards.overwrite=true to replace "
            "them, or choose another shards.dir."
        )
    try:
        folder_mark.claim(folder, MARK, WRITER, files, writing=True)
    except folder_lock.FolderBusy as busy:
        raise FileExistsError(
            f"shards.dir: {folder} is being written by another mode=shards run ({busy.holder}): "
            "wait for it to end, or set shards.dir to another folder."
        ) from None
    try:
        for name in mine:
            (folder / name).unlink()
        yield
    except BaseException:
        folder_lock.release(mark)  # `writing` stays true: the set is unfinished
        raise
    folder_lock.update(mark, writing=False)
    folder_lock.release(mark)


def unfinished_write(folder: Path) -> str | None:
    """Why the shards in local `folder` must not be read yet, or None: a mode=shards write is
    still going on there, or was cut short (its mark says `writing`, or an earlier engine's
    `shards.writing` is there)."""
    for marker in (folder / MARK, folder / OLD_MARK):
        if not marker.is_file():
            continue
        record = folder_lock.read_holder(marker)
        if marker.name == MARK and not record.get("writing"):
            continue
        holder = folder_lock.describe(record)
        if folder_lock.is_held(marker):
            return f"{folder} is being written by mode=shards now ({holder}): wait for it to end"
        return (
            f"{folder} holds an unfinished set of shards: the mode=shards run that wrote them "
            f"({holder}) was cut short; write them again with mode=shards shards.overwrite=true"
        )
    return None


def brace_pattern(folder: Path, split: str, entries: dict[str, dict]) -> str | None:
    """`folder/train-{000000..000041}.tar`: the brace pattern of one split's shards."""
    names = sorted(name for name in entries if name.startswith(f"{split}-"))
    if not names:
        return None
    suffix = names[0].removeprefix(f"{split}-000000")
    return f"{folder}/{split}-{{000000..{len(names) - 1:06d}}}{suffix}"
