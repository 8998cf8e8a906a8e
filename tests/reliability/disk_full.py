"""`python disk_full.py N ARGS...`: train.py ARGS on a disk that fills up after N checkpoints.

The fsync of every later step checkpoint's temp file fails with ENOSPC, as a full disk or
quota reports it on write or on fsync (NFS, delayed allocation). Linux (/proc/self/fd)."""

from __future__ import annotations

import errno
import os
import runpy
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def main() -> None:
    allowed, written = int(sys.argv[1]), []
    real_fsync = os.fsync

    def fsync(fd: int) -> None:
        if Path(os.readlink(f"/proc/self/fd/{fd}")).name.startswith(".step"):
            if len(written) == allowed:
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
            written.append(fd)
        real_fsync(fd)

    os.fsync = fsync
    sys.path.insert(0, str(ROOT))  # as when train.py is the script itself
    sys.argv = [str(ROOT / "train.py"), *sys.argv[2:]]
    runpy.run_path(sys.argv[0], run_name="__main__")


if __name__ == "__main__":
    main()
