"""Reading an input file that nobody vetted: a regular file only, never a blocking open, and
never more bytes than the image it claims to be could need.

A FIFO, socket or device listed as an image would block `open()` or `read()` forever (in the
main process no `loader.timeout` applies), and `/dev/zero` would never end; a 50 GB file named
`.jpg` would be read into memory whole. Each is refused with one line naming the file.
"""

from __future__ import annotations

import os
import stat

from engine.measure.stages import timed_stage

BYTES_PER_PIXEL = 8  # the most an uncompressed pixel takes (16-bit RGBA)
SLACK_BYTES = 16 * 2**20  # metadata, thumbnails, ICC profiles, poor compression


def max_file_bytes(max_pixels: int | None) -> int | None:
    """The largest file that can hold an image of `max_pixels` pixels (None: no limit)."""
    return None if max_pixels is None else max_pixels * BYTES_PER_PIXEL + SLACK_BYTES


_KINDS = (
    (stat.S_ISFIFO, "a FIFO (named pipe)"),
    (stat.S_ISSOCK, "a socket"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISDIR, "a directory"),
)


def _kind(mode: int) -> str:
    return next((name for test, name in _KINDS if test(mode)), "not a regular file")


@timed_stage("read")  # the pipeline's read stage (engine/measure/stages.py)
def read_regular_file(path: str | os.PathLike[str], max_bytes: int | None) -> bytes:
    """The bytes of the regular file `path`; anything else (FIFO, device, socket, folder) or a
    file over `max_bytes` raises `ValueError` before a blocking open or a large read."""
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0)
    fd = os.open(path, flags)  # O_NONBLOCK: opening a FIFO with no writer returns at once
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise ValueError(f"it is {_kind(info.st_mode)}, not an image file")
        if max_bytes is not None and info.st_size > max_bytes:
            raise ValueError(
                f"it is {info.st_size:,} bytes, more than an image within "
                f"dataset.max_image_pixels can take ({max_bytes:,} bytes)"
            )
        with os.fdopen(fd, "rb", closefd=False) as f:
            return f.read()
    finally:
        os.close(fd)
