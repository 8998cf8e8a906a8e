"""Writing WebDataset tar shards (mode=shards): one split's samples into
`{split}-NNNNNN.tar` (or `.tar.gz`) files of at most `max_samples` each, as
`KEY.<image ext>`, `KEY.cls` and `KEY.json` members, with the manifest entry of each shard.

shards.dir is the writer's own folder (engine/core/folder_mark.py): its mark `.shards.lock`
names mode=shards and lists the files of the set there, written before the first byte; a
later write replaces only those. The mark is also the lock (one writer at a time). A write
holds `shards.writing` in the folder from before the first shard until the set is whole (the
manifest in place), so a write cut short (kill -9, a full disk) leaves a set that neither a
training (engine/data/shards/counts.py) nor a rerun takes for a whole one; it is a plain file,
so a copy of the folder (`cp dir/*`) takes it along. A set an earlier engine wrote has no
mark: its own records say it is mode=shards' (the manifest's `written_by`, each Parquet
file's footer, the files its cut write's `shards.writing` lists)."""

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
from engine.core.io import write_error, write_json
from engine.data.shards.manifest import NAME, load
from engine.data.shards.remote import Network

MARK = folder_mark.SHARDS  # the writer's mark and lock in shards.dir
WRITER = "mode=shards"
WRITING = "shards.writing"  # there while a write goes on, and after one cut short
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
    """What an earlier engine's write left in `folder` as its own, by its own records: a
    finished set's (`recorded`), or the files a cut write's `shards.writing` lists."""
    writing = folder / WRITING
    planned = folder_lock.read_holder(writing).get("writes", []) if writing.is_file() else []
    return frozenset({*recorded(folder), *planned, *([WRITING] if writing.is_file() else [])})


def _busy(folder: Path, holder: str) -> FileExistsError:
    """The refusal of a folder another mode=shards run (`holder`) is writing now."""
    return FileExistsError(
        f"shards.dir: {folder} is being written by another mode=shards run ({holder}): wait "
        "for it to end, or set shards.dir to another folder."
    )


@contextmanager
def writing(
    folder: Path,
    overwrite: bool,
    planned: list[str],
    names: re.Pattern[str] = SHARD_NAME,
    extra: tuple[str, ...] = EXTRA,
    recorded: Callable[[Path], set[str]] = recorded_files,
    every: re.Pattern[str] = SHARD_NAME,
) -> Iterator[None]:
    """Around a mode=shards write of the files `planned` into `folder`, its own
    (engine/core/folder_mark.py): refuse another writer's folder, or one holding a file of the
    writer's names (`names`: train-NNNNNN.tar; `extra`: shards.json, classes.txt) that no
    mark lists; refuse (or with shards.overwrite, remove) what an earlier write of these names
    left, finished or not. Files of the other format's names (`every`: either format's) stay,
    listed, unless the folder's set is unfinished: then the whole of it is replaced. A failed
    write leaves `shards.writing`: the set is unfinished."""
    mark, flag = folder / MARK, folder / WRITING
    entries = set(os.listdir(folder))
    unfinished = WRITING in entries  # the whole set is replaced, of either format
    ours = _earlier(folder, recorded)
    listed = {*(folder_lock.read_holder(mark).get("files", []) if mark.is_file() else []), *ours}
    mine = sorted(
        n
        for n in entries
        if names.fullmatch(n)
        or n in (*extra, WRITING)
        or (unfinished and n in listed and (every.fullmatch(n) or n in EXTRA))
    )
    problem = folder_mark.owner_problem(
        folder, MARK, WRITER, frozenset({*planned, *mine}), ours, beside=True, old_marks=False
    )
    if problem is not None:
        raise FileExistsError(
            f"shards.dir: {problem}; choose another shards.dir (or, for a copy of a set "
            f"mode=shards wrote elsewhere, which left its {MARK} there, remove those files)."
        )
    busy = next((lock for lock in (mark, flag) if folder_lock.is_held(lock)), None)
    if busy is not None:
        raise _busy(folder, folder_lock.describe(folder_lock.read_holder(busy)))
    if mine and not overwrite:
        held = (
            f"an unfinished set of shards (the write of "
            f"{folder_lock.describe(folder_lock.read_holder(flag))} was cut short)"
            if unfinished
            else f"shards ({', '.join(mine[:2])}, ...)"
        )
        raise FileExistsError(
            f"shards.dir: {folder} already holds {held}; set shards.overwrite=true to replace "
            "them, or choose another shards.dir."
        )
    kept = {n for n in listed if n in entries and n not in mine}  # the other format's set
    try:
        folder_mark.claim(
            folder, MARK, WRITER, frozenset({*planned, *mine, *kept, WRITING}), add=False
        )
    except folder_lock.FolderBusy as busy_now:
        raise _busy(folder, busy_now.holder) from None
    except OSError as err:  # its record could not be written: a full disk
        raise write_error(err, mark, ELSEWHERE) from err
    try:
        write_json(flag, folder_lock.this_process())  # first: from here the set is unfinished
        for name in mine:
            if name != WRITING:
                (folder / name).unlink()
        yield
    except BaseException:
        folder_lock.release(mark)  # shards.writing stays: the set is unfinished
        raise
    written = sorted(n for n in {*planned, *kept} if os.path.lexists(folder / n))
    folder_lock.update(mark, files=written)
    flag.unlink()
    folder_lock.release(mark)


def unfinished_write(folder: Path) -> str | None:
    """Why the shards in local `folder` must not be read yet, or None: a mode=shards write is
    still going on there, or was cut short (its `shards.writing` is there)."""
    flag = folder / WRITING
    if not flag.is_file():
        return None
    holder = folder_lock.describe(folder_lock.read_holder(flag))
    if folder_lock.is_held(folder / MARK) or folder_lock.is_held(flag):
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
