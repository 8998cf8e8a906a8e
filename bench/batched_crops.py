"""The batched crops of `dataset.decode.device=main|cuda` against torchvision's per-sample
pipeline on the same draws: how many levels apart, for roi_align (the engine's choice,
engine/src/engine/data/batched_geometry.py) and for affine grids with grid_sample.

    python -m bench.batched_crops [--images 48]

48 photo-like images (bench/images.py; 500x375 and 480x333, mixed, as in a real folder), each
drawn under its own seed by the engine's `Geometry` and by torchvision's v2 pipeline, which
draw the same boxes (engine/tests/test_encoded.py). Prints one line per pipeline: mean and
max level gap of each resampler, and its time for the batch on this CPU.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import torch
import torch.nn.functional as F
from torchvision.transforms import v2

from bench.images import photo_like
from engine.data.batched_geometry import Plan, resample
from engine_dev.crops import seeded_draws

PIPELINES = {
    "train 224 (RandomResizedCrop + flip)": [
        v2.RandomResizedCrop(224, antialias=True),
        v2.RandomHorizontalFlip(),
    ],
    "val 224 (Resize 256, CenterCrop)": [v2.Resize(256, antialias=True), v2.CenterCrop(224)],
    "train 48 (the demo's crop)": [
        v2.RandomResizedCrop(48, scale=(0.6, 1.0), ratio=(0.8, 1.25), antialias=True),
        v2.RandomHorizontalFlip(),
    ],
}


def grid_sampled(image: torch.Tensor, plan: Plan, size: tuple[int, int]) -> torch.Tensor:
    """The plan's box resampled by bilinear grid_sample at the output pixels' centres."""
    (x1, y1, x2, y2), (height, width) = plan.box, image.shape[-2:]
    xs = x1 + (torch.arange(size[1]) + 0.5) * (x2 - x1) / size[1]
    ys = y1 + (torch.arange(size[0]) + 0.5) * (y2 - y1) / size[0]
    gy, gx = torch.meshgrid(ys / height * 2 - 1, xs / width * 2 - 1, indexing="ij")
    grid = torch.stack([gx, gy], -1)[None]
    out = F.grid_sample(image[None].float(), grid, "bilinear", "border", align_corners=False)[0]
    return (out.flip(-1) if plan.mirrored else out).round().clamp(0, 255).to(torch.uint8)


def _gap(a: torch.Tensor, b: torch.Tensor) -> str:
    gap = (a.int() - b.int()).abs()
    return f"mean {gap.float().mean():.2f}, max {int(gap.max())}"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--images", type=int, default=48)
    args = parser.parse_args(argv)
    rng = np.random.default_rng(0)
    images = [
        torch.from_numpy(np.array(photo_like(rng, *((500, 375) if i % 3 else (333, 480)))))
        .permute(2, 0, 1)
        .contiguous()
        for i in range(args.images)
    ]
    for name, steps in PIPELINES.items():
        geometry, expected, plans = seeded_draws(steps, images, name)
        assert geometry.size is not None
        start = time.perf_counter()
        batched = resample(images, plans, geometry.size)
        roi_ms = 1000 * (time.perf_counter() - start)
        start = time.perf_counter()
        grids = [grid_sampled(x, p, geometry.size) for x, p in zip(images, plans, strict=True)]
        grid_ms = 1000 * (time.perf_counter() - start)
        print(
            f"{name}: roi_align {_gap(batched, expected)} ({roi_ms:.0f} ms), grid_sample "
            f"{_gap(torch.stack(grids), expected)} ({grid_ms:.0f} ms), levels from torchvision"
        )


if __name__ == "__main__":
    main()
