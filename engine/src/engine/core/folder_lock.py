"""An advisory lock on a folder: flock on a file in it, held by one process at a time, with a
record of who holds it (pid, host, start, command) in the file. The kernel drops the lock when
its process dies (kill -9 too), so a stale one never blocks a rerun. What a lock guards (a run
dir, a shard or cache folder being written) is its user's to say.

Kept rather than `filelock` (4.3, read for engine 2.0): its lock file holds no record of the
holder, and naming who holds a busy run dir (pid, host, start) is what the refusal says; its
fork handling is an audit hook and pinned objects for every fork, where a loader worker here
only has to close its copies of the descriptors (`_close_in_child`). This is flock, 130 lines."""

from __future__ import annotations

import fcntl
import json
import logging
import os
import socket
import sys
from datetime import datetime
from pathlib import Path
from typing import Annotated, Any, TypedDict

from engine.core.bounds import Count
from engine.core.records import Open, RecordError, read_record

log = logging.getLogger(__name__)

MAX_RECORD_BYTES = 2**26  # a shard write's planned files: ~3 million names
FIX = "the next holder rewrites it."
_held: dict[Path, int] = {}  # lock file -> the descriptor whose flock this process holds


class FolderBusy(Exception):
    """Another process holds the lock; `holder` says who, in words."""

    def __init__(self, path: Path, record: dict[str, Any]) -> None:
        super().__init__(f"{path} is held by {describe(record)}")
        self.path, self.record, self.holder = path, record, describe(record)


def describe(record: dict[str, Any]) -> str:
    """`pid 123 on host, started 2026-12-01T17:48:02` (what is known of it)."""
    return (
        f"pid {record.get('pid', '?')} on {record.get('host', '?')}, started "
        f"{record.get('started', '?')}"
    )


class Holder(TypedDict, total=False):
    """A lock file's record: who holds it, and what its user added (`hold`'s `record`)."""

    pid: Count
    host: str
    started: str
    command: str
    sweep: str | None  # a run dir's: the multirun its job is of (engine/runs/run_lock.py)
    job: Count | None
    writes: list[str]  # an earlier engine's cut shard write's files (its shards.writing)
    writer: str  # the mark's (engine/core/folder_mark.py): who owns the folder, e.g. mode=train
    version: str  # the engine version that wrote the mark
    files: list[str]  # the files the writer writes in the folder


def read_holder(path: Path) -> Holder:
    """The record in lock file `path`; empty when it is missing or new (no bytes yet). One that
    is unreadable or not a Holder (a hand edit) is empty too, with a warning naming it: the
    record only says who holds the lock, and the next holder writes it anew. Keys it does
    not know (another engine version's) are kept."""
    try:
        if os.path.isfile(path) and os.path.getsize(path) == 0:
            return {}
        return read_record(path, Annotated[Holder, Open()], MAX_RECORD_BYTES, "a lock file", FIX)
    except FileNotFoundError:
        return {}
    except RecordError as err:
        log.warning("ignoring the lock record of %s", err)
        return {}


def held_here(path: Path) -> bool:
    """Whether this process holds lock file `path`."""
    return path.absolute() in _held


def is_held(path: Path) -> bool:
    """Whether a live process (this one included) holds lock file `path` now."""
    if held_here(path):
        return True
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except FileNotFoundError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    except OSError:  # no flock here: nothing can be known, so nothing is claimed
        return False
    finally:
        os.close(fd)
    return False


def hold(path: str | Path, **record: Any) -> dict[str, Any] | None:
    """Lock file `path` for this process until `release` (or its end), replacing its record
    with this process's and `record`; returns the record it held before (None where the file
    system has no flock: a warning says so). Raises FolderBusy when another process holds it.
    Holding a file this process holds already returns its record unchanged."""
    path = Path(path).absolute()
    if path in _held:
        return read_holder(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    while True:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o666)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise FolderBusy(path, read_holder(path)) from None
        except OSError as err:  # a file system without flock (some network mounts)
            _write(fd, this_process() | record)  # what it says of its writer still holds
            os.close(fd)
            log.warning(
                "%s: cannot lock it (%s), so a second process using %s at the same time "
                "would not be stopped",
                path,
                err.strerror,
                path.parent,
            )
            return None
        try:  # a holder may have removed the file as we opened it: lock the file now there
            if os.stat(path).st_ino == os.fstat(fd).st_ino:
                break
        except FileNotFoundError:
            pass
        os.close(fd)
    before = read_holder(path)
    _write(fd, this_process() | record)
    _held[path] = fd
    return before


def this_process() -> dict[str, Any]:
    """Who this process is, as a lock record says it (`describe` reads it back)."""
    return {
        "pid": os.getpid(),
        "host": socket.gethostname(),
        "started": datetime.now().isoformat(timespec="seconds"),
        "command": " ".join(sys.argv)[:500],
    }


def _write(fd: int, record: dict[str, Any]) -> None:
    os.ftruncate(fd, 0)
    os.pwrite(fd, (json.dumps(record) + "\n").encode(), 0)


def update(path: str | Path, **record: Any) -> None:
    """Rewrite the record of lock file `path`, which this process holds (or took where the
    file system has no flock), with `record`'s keys changed: a writer's list of its files
    once it knows them."""
    path = Path(path).absolute()
    changed = read_holder(path) | record
    if path in _held:
        _write(_held[path], changed)
        return
    fd = os.open(path, os.O_RDWR | os.O_CLOEXEC)
    try:
        _write(fd, changed)
    finally:
        os.close(fd)


def release(path: str | Path, remove: bool = False) -> None:
    """Let go of lock file `path`; `remove` deletes it first (while still held, so nobody
    sees it missing while it is locked)."""
    path = Path(path).absolute()
    fd = _held.pop(path, None)
    if fd is None:
        return
    if remove:
        path.unlink(missing_ok=True)
    os.close(fd)


def _close_in_child() -> None:
    """A forked child (a loader worker) closes its copies of the lock descriptors: they would
    keep a lock alive after a kill -9 of its holder until the orphan noticed (seconds), and a
    rerun would be refused meanwhile. Closing a copy leaves the parent's lock held."""
    for fd in _held.values():
        os.close(fd)
    _held.clear()


os.register_at_fork(after_in_child=_close_in_child)
