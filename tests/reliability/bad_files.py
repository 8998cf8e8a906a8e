"""A copy of the tiny demo ImageFolder with three unreadable train files, for the bad-data tests."""

from __future__ import annotations

import shutil
from pathlib import Path


def corrupt_tree(demo_dir: Path, dest: Path) -> tuple[Path, set[str]]:
    """Copy demo_dir/imagefolder to `dest` and break three train files: a truncated JPEG, an
    empty file and a text file named .jpg. Returns the root and the three paths."""
    shutil.copytree(demo_dir / "imagefolder", dest)
    train = dest / "train"
    truncated = sorted((train / "circle").glob("*.jpg"))[1]
    data = truncated.read_bytes()
    truncated.write_bytes(data[: len(data) // 2])
    empty = sorted((train / "cross").glob("*.jpg"))[0]
    empty.write_bytes(b"")
    text = train / "square" / "notes.jpg"
    text.write_text("not an image, just a note someone saved with the wrong name\n")
    return dest, {str(truncated), str(empty), str(text)}
