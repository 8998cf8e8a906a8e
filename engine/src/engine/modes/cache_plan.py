"""What mode=cache will write, decided and said before it writes: the short side (taken from
the transforms when cache.short_side is null, so a 48 px pipeline is not cached at 256) and
the size of the store on disk."""

from __future__ import annotations

import logging
from collections.abc import Sequence

from PIL import Image
from torch.utils.data import Dataset

from engine.data.transforms import Pipelines, first_size

log = logging.getLogger(__name__)

SAMPLED = 32  # image headers read per split for the size estimate
# a JPEG of quality 90 against raw pixels, on photos (engine/conf/cache/default.yaml)
JPEG_SHARE = 1 / 9


def side_from_transforms(pipelines: Pipelines) -> tuple[int, str]:
    """(short side, where it came from): the larger of what the val and train pipelines' first
    Resize or crop asks for, so both read the cache without upscaling."""
    found = [
        (size[0], f"transforms.{name}'s {size[1]}")
        for name, pipeline in (("val", pipelines.val), ("train", pipelines.train))
        if (size := first_size(pipeline)) is not None
    ]
    if not found:
        raise ValueError(
            "cache.short_side=null takes the side from the transforms' first Resize or crop, "
            "and neither transforms.val nor transforms.train has one: set cache.short_side "
            "(pixels)."
        )
    return max(found, key=lambda side: side[0])  # a tie: the val pipeline's


def _stored_pixels(width: int, height: int, short_side: int) -> int:
    """Pixels of one image after shrinking its shorter side to `short_side` (never enlarged)."""
    scale = min(1.0, short_side / min(width, height))
    return round(width * scale) * round(height * scale)


def estimated_bytes(splits: Sequence[Dataset], short_side: int, encoding: str) -> tuple[int, int]:
    """(pixels, bytes on disk) the cache of `splits` will hold, from the headers of up to
    SAMPLED images per split spread over it; a file that does not open is left to the build,
    which names it."""
    pixels = 0.0
    for files in splits:
        count = len(files)  # type: ignore[arg-type]
        step = max(1, count // SAMPLED)
        sizes = []
        for index in range(0, count, step)[:SAMPLED]:
            try:
                with Image.open(files.get_filename(index)) as image:  # type: ignore[attr-defined]
                    sizes.append(_stored_pixels(*image.size, short_side))
            except (OSError, ValueError, Image.DecompressionBombError):
                continue
        each = sum(sizes) / len(sizes) if sizes else short_side**2
        pixels += each * count
    raw = 3 * pixels  # RGB, one byte a channel
    return round(pixels), round(raw * (JPEG_SHARE if encoding == "jpeg" else 1))


def log_plan(
    splits: Sequence[Dataset], short_side: int, source: str, encoding: str
) -> tuple[int, int]:
    """Log, in one line, what the cache will hold; returns its (pixels, bytes)."""
    pixels, size = estimated_bytes(splits, short_side, encoding)
    log.info(
        "cache: writing %d images at short side %d px (%s): ~%.1f megapixels, ~%.1f MB on "
        "disk (%s)",
        sum(len(files) for files in splits),  # type: ignore[arg-type]
        short_side,
        source,
        pixels / 1e6,
        size / 2**20,
        encoding if encoding == "raw" else f"{encoding}, about 1/9 of raw",
    )
    return pixels, size
