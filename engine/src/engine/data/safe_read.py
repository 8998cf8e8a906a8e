"""Reading an input file that nobody vetted: a regular file only, never a blocking open, and
never more bytes than the image it claims to be could need.

A FIFO, socket or device listed as an image would block `open()` or `read()` forever (in the
main process no `loader.timeout` applies), and `/dev/zero` would never end; a 50 GB file named
`.jpg` would be read into memory whole. Each is refused with one line naming the file, by the
one bounded reader every file the engine reads goes through (engine/core/records.py).
"""

from __future__ import annotations

import os

from engine.core.records import regular_file_bytes
from engine.measure.stages import timed_stage

BYTES_PER_PIXEL = 8  # the most an uncompressed pixel takes (16-bit RGBA)
SLACK_BYTES = 16 * 2**20  # metadata, thumbnails, ICC profiles, poor compression


def max_file_bytes(max_pixels: int | None) -> int | None:
    """The largest file that can hold an image of `max_pixels` pixels (None: no limit)."""
    return None if max_pixels is None else max_pixels * BYTES_PER_PIXEL + SLACK_BYTES


@timed_stage("read")  # the pipeline's read stage (engine/measure/stages.py)
def read_regular_file(path: str | os.PathLike[str], max_bytes: int | None) -> bytes:
    """The bytes of the regular file `path`; anything else (FIFO, device, socket, folder) or a
    file over `max_bytes` raises `ValueError` before a blocking open or a large read."""
    limit = "an image within dataset.decode.max_image_pixels can take"
    return regular_file_bytes(path, max_bytes, "an image file", limit)
