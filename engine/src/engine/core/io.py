"""Crash-safe file writes: a reader never sees a half-written file."""

from __future__ import annotations

import csv
import errno
import io
import json
import logging
import os
import re
import secrets
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, BinaryIO

from engine.core.csv_cells import escaped

log = logging.getLogger(__name__)

# `.<name>.<8 random characters>.tmp` beside `<name>`: what atomic_write_bytes writes first
TEMPORARY = re.compile(r"\.(?P<name>.+)\.[a-z0-9_]{8}\.tmp")
_ELSEWHERE = "the run elsewhere (another hydra.run.dir)"
_FIXES = {
    getattr(errno, "EDQUOT", errno.ENOSPC): "free space within your disk quota, or write {}",
    errno.ENOSPC: "free space on that disk, or write {}",
    errno.EFBIG: "that file system caps the file size: write {}",
    errno.EACCES: "make that folder writable, or write {}",
    errno.EPERM: "make that folder writable, or write {}",
    errno.EROFS: "that file system is read-only: write {}",
}


def write_error(err: OSError, path: str | Path, elsewhere: str = _ELSEWHERE) -> OSError:
    """`err` (a failed write of `path`) as one line naming the file and the fix: free space,
    or write `elsewhere` (e.g. "the shards elsewhere (another shards.dir)")."""
    fix = _FIXES.get(err.errno or 0, "check that folder, or write {}").format(elsewhere)
    return OSError(err.errno, f"{err.strerror or err} while writing {path}: {fix}.")


def output_folder(path: str | Path, key: str) -> Path:
    """Folder `path` (the value of config key `key`), made if missing; a link to nothing or a
    file there is one line naming the key."""
    path = Path(path)
    if path.is_symlink() and not path.exists():
        raise FileNotFoundError(
            f"{key}={path}: a symbolic link to {os.readlink(path)}, which does not exist: "
            f"create that folder, or set {key} to another one."
        )
    if path.exists() and not path.is_dir():
        raise NotADirectoryError(f"{key}={path} is a file, not a folder: set {key} to a folder.")
    path.mkdir(parents=True, exist_ok=True)
    return path


def _create_temporary(path: Path) -> tuple[int, Path]:
    """A new, empty temp file beside `path`, opened for writing. Created with mode 0o666 like
    `open(path, "w")`, so the kernel applies the umask (and a folder's default ACL) exactly as
    for any other file of the run; tempfile.mkstemp would force 0o600. Its random name comes
    from `secrets`, never the seeded `random` whose state a checkpoint has just captured."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0)
    while True:
        tmp = path.with_name(f".{path.name}.{secrets.token_hex(4)}.tmp")
        try:
            return os.open(tmp, flags, 0o666), tmp
        except FileExistsError:
            continue


@contextmanager
def atomic_writer(path: str | Path) -> Iterator[BinaryIO]:
    """A binary file to write `path` through: a temp file beside it, fsynced and renamed over
    `path` when the block ends, so a reader never sees it half-written. The file gets the mode
    a plain `open(path, "w")` would give. On failure the temp file is removed and an OSError
    names `path` and the fix (a full disk: free space or another hydra.run.dir)."""
    path = Path(path)
    tmp = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = _create_temporary(path)
        with os.fdopen(fd, "wb") as f:
            yield f
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException as err:
        if tmp is not None:
            tmp.unlink(missing_ok=True)
        if not isinstance(err, OSError):
            raise
        raise write_error(err, path) from err


def atomic_write_bytes(path: str | Path, data: bytes) -> None:
    """Write `data` to `path` through `atomic_writer`."""
    with atomic_writer(path) as f:
        f.write(data)


def write_json(path: str | Path, obj: Any) -> None:
    """Atomically write `obj` as indented, key-sorted JSON."""
    atomic_write_bytes(path, (json.dumps(obj, indent=2, sort_keys=True) + "\n").encode())


def csv_text(columns: Sequence[str], rows: Iterable[Mapping[str, Any]], header: bool = True) -> str:
    """`rows` (dicts; a missing column is left empty, other keys ignored) as CSV text, after a
    header of `columns` (with `header`); every cell, the header's too, through escape_cell,
    so no class or file name runs as a spreadsheet formula (engine/core/csv_cells.py)."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    if header:
        writer.writerow(escaped(columns))
    writer.writerows(escaped(row.get(column, "") for column in columns) for row in rows)
    return buffer.getvalue()


def write_csv(path: str | Path, columns: list[str], rows: list[dict[str, Any]]) -> None:
    """Atomically write `rows` as `csv_text`; file names that are not valid UTF-8 are kept
    byte for byte (as in bad_samples.csv)."""
    atomic_write_bytes(path, csv_text(columns, rows).encode("utf-8", "surrogateescape"))


def remove_stale_temporaries(folder: Path) -> int:
    """Delete the temp files that an atomic_write_bytes killed mid-write (kill -9, power loss)
    left in `folder` (`.<name>.<8 characters>.tmp`, nothing else); returns how many. Call it
    only while no other process writes there (at the start of the run that owns `folder`)."""
    if not folder.is_dir():
        return 0
    removed = 0
    for entry in folder.iterdir():
        if TEMPORARY.fullmatch(entry.name) and entry.is_file() and not entry.is_symlink():
            entry.unlink(missing_ok=True)
            removed += 1
    return removed
