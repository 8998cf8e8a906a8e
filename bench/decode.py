"""`make bench-decode`: each image format's decoders side by side on one thread, to uint8 CHW
RGB tensors, on the same seeded 500x375 photo-like images (bench/images.py).

Columns per format: torchvision.io (deprecated since 0.29), TorchCodec (its decode_heic loads a
system libheif, which a user's machine may lack), Pillow (open + convert('RGB') + numpy; HEIC
through pillow-heif), and the engine's chosen path (engine/data/decode.py's
decode_image_bytes, header check included), whose pixels must equal those of the decoder it
names. A format's columns alternate in one process, the order rotated every round; each cell
is the median [min-max] of images/s over the rounds and the median of the per-round ratios to
Pillow; TorchCodec / torchvision.io is that ratio to the deprecated decoder it replaces.
Pillow's AVIF plugin and pillow-heif are held to one thread (TorchCodec's AVIF decoder uses one
by default). engine/data/decode.py picks its decoder per format from this table.

    python -m bench.decode [--rounds 5] [--images 24] [--no-write]
"""

from __future__ import annotations

import argparse
import importlib.metadata
import inspect
import io
import statistics
import sys
import time
from collections.abc import Callable, Iterator
from datetime import date
from pathlib import Path

import numpy as np
import pillow_heif
import torch
import torchvision.io
from PIL import AvifImagePlugin, Image
from torchcodec import decoders

from bench import blocks, report
from bench.images import photo_like
from bench.timing import spread
from engine.data.decode import decode_image_bytes
from engine.measure.timing import BatchMeter, time_window

ROOT = Path(__file__).resolve().parents[1]
BLOCK = "make bench-decode"
SIZE = (500, 375)
PASS_S = 0.3  # about this long per measurement: as many passes over the images as fit
Decoder = Callable[[bytes], torch.Tensor]


def pillow(data: bytes) -> torch.Tensor:
    """The classic path: PIL open + convert('RGB') + numpy -> tensor."""
    with Image.open(io.BytesIO(data)) as img:
        return torch.from_numpy(np.asarray(img.convert("RGB")).copy()).permute(2, 0, 1)


def _torchvision(decode: Callable[..., torch.Tensor]) -> Decoder:
    """`decode` on the bytes as a tensor, asked for RGB where it takes a mode (decode_gif has
    none: it always gives RGB)."""
    rgb = {"mode": torchvision.io.ImageReadMode.RGB}
    options = rgb if "mode" in inspect.signature(decode).parameters else {}

    def run(data: bytes) -> torch.Tensor:
        return decode(torch.frombuffer(bytearray(data), dtype=torch.uint8), **options)

    return run


def _torchcodec(decode: Callable[..., torch.Tensor]) -> Decoder:
    return lambda data: decode(data, mode="RGB")


def engine(data: bytes) -> torch.Tensor:
    """The engine's path: header check, then the decoder it picks for the format."""
    return decode_image_bytes(data, "")


# format: (the decoder's name in torchvision.io and in torchcodec.decoders, the engine's choice)
FORMATS = {
    "JPEG": ("decode_jpeg", "TorchCodec"),
    "PNG": ("decode_png", "TorchCodec"),
    "WebP": ("decode_webp", "TorchCodec"),
    "GIF": ("decode_gif", "Pillow"),
    "AVIF": ("decode_avif", "Pillow"),
    "HEIC": ("decode_heic", "Pillow"),
}
COLUMNS = ("torchvision.io", "TorchCodec", "Pillow", "engine")


def _encoded(image: Image.Image, fmt: str) -> bytes:
    """`image` in `fmt`: JPEG q90 as the other benchmarks, GIF an adaptive palette, the rest
    at their writer's default quality."""
    buffer = io.BytesIO()
    if fmt == "HEIC":
        pillow_heif.from_pillow(image).save(buffer)
    elif fmt == "GIF":
        image.convert("P", palette=Image.Palette.ADAPTIVE).save(buffer, "GIF")
    else:
        image.save(buffer, fmt, **({"quality": 90} if fmt == "JPEG" else {}))
    return buffer.getvalue()


def _usable(decode: Decoder, blob: bytes) -> Decoder | str:
    """`decode` if it decodes `blob`, else why not (its error's first sentence)."""
    try:
        decode(blob)
    except RuntimeError as err:
        return str(err).split(". ")[0].strip()
    return decode


def _rate(decode: Decoder, blobs: list[bytes], passes: int) -> float:
    """Images/s over `passes` passes (after one untimed), each a batch to the engine's meter."""

    def decoded() -> Iterator[list[torch.Tensor]]:
        while True:
            yield [decode(blob) for blob in blobs]

    return time_window(BatchMeter(size=len), decoded, 1, passes).samples_per_s


def measure(
    fmt: str, blobs: list[bytes], rounds: int, say: Callable[[str], None]
) -> dict[str, list[float] | str]:
    """images/s per column over `rounds` rotated rounds, or why a column has none."""
    name, chosen = FORMATS[fmt]
    candidates = {
        "torchvision.io": _usable(_torchvision(getattr(torchvision.io, name)), blobs[0]),
        "TorchCodec": _usable(_torchcodec(getattr(decoders, name)), blobs[0]),
        "Pillow": pillow,
        "engine": engine,
    }
    reference = candidates[chosen]
    if not callable(reference) or not torch.equal(engine(blobs[0]), reference(blobs[0])):
        raise RuntimeError(f"{fmt}: the engine's pixels are not {chosen}'s")
    runs = {column: c for column, c in candidates.items() if callable(c)}
    start = time.perf_counter()
    for blob in blobs:  # also warms the engine's path up
        engine(blob)
    passes = max(1, round(PASS_S / (time.perf_counter() - start)))
    rates: dict[str, list[float] | str] = {
        column: [] if callable(c) else c for column, c in candidates.items()
    }
    order = list(runs)
    for r in range(rounds):
        for column in order[r % len(order) :] + order[: r % len(order)]:
            rates[column].append(_rate(runs[column], blobs, passes))  # type: ignore[union-attr]
        say(f"  {fmt} round {r + 1}: " + ", ".join(f"{c} {rates[c][-1]:.0f}" for c in runs))
    return rates


def _ratio(rates: list[float] | str, reference: list[float] | str) -> str:
    """The median of the per-round ratios, or a dash where either side has no decoder."""
    if isinstance(rates, str) or isinstance(reference, str):
        return "-"
    return f"{statistics.median(a / b for a, b in zip(rates, reference, strict=True)):.2f}x"


def _cell(rates: list[float] | str, pillow_rates: list[float]) -> str:
    if isinstance(rates, str):
        return "not available"
    return f"{spread(rates)}, {_ratio(rates, pillow_rates)}"


def section(rounds: int, images: int, say: Callable[[str], None]) -> str:
    """The block's text: one row per format."""
    started = time.perf_counter()
    torch.set_num_threads(1)
    pillow_heif.options.DECODE_THREADS = 1
    AvifImagePlugin.DEFAULT_MAX_THREADS = 1
    rng = np.random.default_rng(0)
    photos = [photo_like(rng, *SIZE) for _ in range(images)]
    lines = [
        f"| format (mean file) | {' | '.join(COLUMNS)} | TorchCodec / torchvision.io | "
        "engine decodes with |",
        "|---|---|---|---|---|---|---|",
    ]
    missing: dict[tuple[str, str], list[str]] = {}  # (column, why) -> formats
    for fmt, (_, chosen) in FORMATS.items():
        say(f"{fmt}: encoding {images} images ...")
        blobs = [_encoded(photo, fmt) for photo in photos]
        rates = measure(fmt, blobs, rounds, say)
        cells = [_cell(rates[column], rates["Pillow"]) for column in COLUMNS]  # type: ignore[arg-type]
        size = sum(map(len, blobs)) / len(blobs) / 1024
        replaced = _ratio(rates["TorchCodec"], rates["torchvision.io"])
        lines.append(f"| {fmt} ({size:.0f} KB) | {' | '.join(cells)} | {replaced} | {chosen} |")
        for column in COLUMNS:
            if isinstance(rates[column], str):
                missing.setdefault((column, rates[column]), []).append(fmt)  # type: ignore[arg-type]
    notes = [
        f"{c} {', '.join(fmts)}: not available here ({why})." for (c, why), fmts in missing.items()
    ]
    wall = time.perf_counter() - started
    versions = ", ".join(
        f"{p} {importlib.metadata.version(p)}" for p in ("torchcodec", "pillow-heif")
    )
    return (
        f"## Image decoders per format: `make bench-decode` ({date.today().isoformat()})\n\n"
        f"`make bench-decode` (= `python -m bench.decode --rounds {rounds} --images {images}`), "
        f"{wall:.0f} s wall, one thread. Machine: {report.machine()}; {versions}.\n\n"
        + " ".join(__doc__.split("\n\n")[1].split())
        + f"\n\nimages/s, median [min-max] of {rounds} rounds, x Pillow:\n\n"
        + "\n".join(lines)
        + "".join(f"\n\n{note}" for note in notes)
        + "\n"
    )


def main(argv: list[str] | None = None) -> str:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--images", type=int, default=24, help="distinct images per format")
    parser.add_argument("--no-write", action="store_true", help="print only, leave BENCHMARKS.md")
    args = parser.parse_args(argv)
    text = section(args.rounds, args.images, lambda line: print(line, file=sys.stderr, flush=True))
    blocks.publish(text, BLOCK, not args.no_write, ROOT / "BENCHMARKS.md")
    return text


if __name__ == "__main__":
    main()
