"""A real-looking ImageFolder for the bad-data tests: a few hundred images of mixed formats and
modes with odd names, and several unreadable files at once, each broken another way."""

from __future__ import annotations

import io
import os
import random
import shutil
from pathlib import Path

from PIL import Image

from engine_dev.hostile import lying_images, short_png


def _reencoded(data: bytes, fmt: str, mode: str) -> bytes:
    buffer = io.BytesIO()
    Image.open(io.BytesIO(data)).convert(mode).save(buffer, format=fmt)
    return buffer.getvalue()


def real_folder(demo_dir: Path, dest: Path, copies: int = 5) -> tuple[Path, dict[str, str]]:
    """`copies` x the tiny demo train split (mixed JPEG/PNG, grey, palette and CMYK copies,
    names with spaces and accents) plus its val split, with unreadable train files: a
    truncated JPEG, a PNG shorter than its header (the one that crashed torchvision), an empty
    file, text named .jpg, a FIFO, a JPEG declaring 65500x65500 pixels, a dangling symlink, a
    symlink to itself and a truncated file whose name is not UTF-8. Returns the root and
    {bad path: how it is broken}."""
    rng = random.Random(0)
    shutil.copytree(demo_dir / "imagefolder" / "val", dest / "val")
    for source in sorted((demo_dir / "imagefolder" / "train").glob("*/*")):
        folder = dest / "train" / source.parent.name
        folder.mkdir(parents=True, exist_ok=True)
        data = source.read_bytes()
        for copy in range(copies):
            mode, fmt, suffix = rng.choice(
                [
                    ("RGB", None, source.suffix),
                    ("L", "PNG", ".png"),
                    ("P", "PNG", ".png"),
                    ("CMYK", "JPEG", ".jpg"),
                    ("L", "JPEG", ".JPG"),
                ]
            )
            name = f"{rng.choice(['', 'a photo ', 'café_'])}{source.stem}_{copy}{suffix}"
            body = data if fmt is None else _reencoded(data, fmt, mode)
            (folder / name).write_bytes(body)
    circle, cross, square = (dest / "train" / name for name in ("circle", "cross", "square"))
    victim = sorted(circle.glob("*.jpg"))[0]
    bad = {}
    truncated = circle / "truncated.jpg"
    truncated.write_bytes(victim.read_bytes()[:300])
    bad[str(truncated)] = "truncated"
    (cross / "short.png").write_bytes(short_png(40, 40))
    bad[str(cross / "short.png")] = "PNG data shorter than its header"
    (cross / "empty.jpg").write_bytes(b"")
    bad[str(cross / "empty.jpg")] = "empty"
    (square / "notes.jpg").write_text("not an image\n")
    bad[str(square / "notes.jpg")] = "not an image"
    os.mkfifo(square / "pipe.jpg")
    bad[str(square / "pipe.jpg")] = "FIFO"
    (circle / "bomb.jpg").write_bytes(lying_images(rng)["lying.jpg"])
    bad[str(circle / "bomb.jpg")] = "declared size"
    (circle / "gone.png").symlink_to(circle / "deleted.png")
    bad[str(circle / "gone.png")] = "a dangling symlink"
    (cross / "loop.jpg").symlink_to(cross / "loop.jpg")
    bad[str(cross / "loop.jpg")] = "a symlink to itself"
    raw = os.fsencode(square) + b"/trunc_\xff.jpg"
    with open(raw, "wb") as f:
        f.write(victim.read_bytes()[:200])
    bad[os.fsdecode(raw)] = "truncated, name not UTF-8"
    return dest, bad
