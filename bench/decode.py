"""Side-by-side decode benchmark: Pillow vs torchvision.io, to uint8 CHW RGB tensors.

    python -m bench.decode [--images data/demo/imagefolder] [--repeats 5]

Both decoders run interleaved in one process on the same bytes (demo images and the same
images re-encoded at 500x375, JPEG q90); the ratio is what to read, absolute rates drift.
"""

from __future__ import annotations

import argparse
import io
from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch
from PIL import Image

from engine.data.decode import decode_image_bytes
from engine.measure.timing import BatchMeter, time_window


def pillow_decode(data: bytes) -> torch.Tensor:
    """The classic path: PIL open + convert('RGB') + numpy -> tensor."""
    with Image.open(io.BytesIO(data)) as img:
        return torch.from_numpy(np.asarray(img.convert("RGB")).copy()).permute(2, 0, 1)


def rate(fn: Callable[[bytes], torch.Tensor], blobs: list[bytes], repeats: int) -> float:
    """Images per second over `repeats` passes (each pass one batch to engine/src/engine/measure/timing.py)."""
    passes = ([fn(blob) for blob in blobs] for _ in range(repeats))
    return time_window(BatchMeter(size=len), lambda: passes, 0, repeats).samples_per_s


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--images", default="data/demo/imagefolder")
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    torch.set_num_threads(1)
    files = sorted(Path(args.images).rglob("*.jpg"))[:400]
    if not files:
        raise SystemExit(f"no .jpg under {args.images}; run `make data` first")
    small = [f.read_bytes() for f in files]
    large = []
    for blob in small[:100]:
        out = io.BytesIO()
        Image.open(io.BytesIO(blob)).convert("RGB").resize((500, 375)).save(out, "JPEG", quality=90)
        large.append(out.getvalue())
    ours = lambda blob: decode_image_bytes(blob, "x.jpg")  # noqa: E731
    print("| images | Pillow img/s | torchvision.io img/s | ratio |")
    print("|---|---|---|---|")
    for name, blobs in ((f"demo JPEGs ({len(small)})", small), ("500x375 JPEG q90", large)):
        rate(ours, blobs[:20], 1)  # warm-up
        pil, tv = rate(pillow_decode, blobs, args.repeats), rate(ours, blobs, args.repeats)
        print(f"| {name} | {pil:.0f} | {tv:.0f} | {tv / pil:.2f}x |")


if __name__ == "__main__":
    main()
