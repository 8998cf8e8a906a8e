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
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

# `.<name>.<8 random characters>.tmp` beside `<name>`: what atomic_write_bytes writes first
TEMPORARY = re.compile(r"\.(?P<name>.+)\.[a-z0-9_]{8}\.tmp")
_ELSEWHERE = "or write the run elsewhere (another hydra.run.dir)"
_FIXES = {
    getattr(errno, "EDQUOT", errno.ENOSPC): f"free space within your disk quota, {_ELSEWHERE}",
    errno.ENOSPC: f"free space on that disk, {_ELSEWHERE}",
    errno.EACCES: f"make that folder writable, {_ELSEWHERE}",
    errno.EPERM: f"make that folder writable, {_ELSEWHERE}",
    errno.EROFS: "that file system is read-only: write the run elsewhere (another hydra.run.dir)",
}


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


def atomic_write_bytes(path: str | Path, data: bytes) -> None:
    """Write `data` to a temp file beside `path`, fsync it, then rename it over `path`. The file
    gets the mode a plain `open(path, "w")` would give. On failure the temp file is removed and
    an OSError names `path` and the fix (a full disk: free space or another hydra.run.dir)."""
    path = Path(path)
    tmp = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = _create_temporary(path)
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException as err:
        if tmp is not None:
            tmp.unlink(missing_ok=True)
        if not isinstance(err, OSError):
            raise
        fix = _FIXES.get(err.errno or 0, f"check that folder, {_ELSEWHERE}")
        reason = err.strerror or str(err)
        raise OSError(err.errno, f"{reason} while writing {path}: {fix}.") from err


def write_json(path: str | Path, obj: Any) -> None:
    """Atomically write `obj` as indented, key-sorted JSON."""
    atomic_write_bytes(path, (json.dumps(obj, indent=2, sort_keys=True) + "\n").encode())


def write_csv(path: str | Path, columns: list[str], rows: list[dict[str, Any]]) -> None:
    """Atomically write `rows` (dicts; a missing column is left empty) as CSV with a header;
    file names that are not valid UTF-8 are kept byte for byte (as in bad_samples.csv)."""
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=columns, extrasaction="ignore", lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    atomic_write_bytes(path, buffer.getvalue().encode("utf-8", "surrogateescape"))


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
