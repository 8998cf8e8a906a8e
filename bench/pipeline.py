"""Side-by-side image-pipeline benchmark: the tutorial pipeline vs the template's uint8 path.

    python -m bench.pipeline [--images 1024] [--rounds 3] [--workers 2] [--batch-size 64]

Writes an ImageFolder of 500x375 JPEGs (q90, made from the demo images) into a temp dir,
then alternates the two pipelines round by round in one process (each round: one untimed
warm-up pass with persistent workers, then one timed pass) and reports images/s and their
ratio (absolute rates drift on shared machines; the ratio is what to read).
- tutorial: torchvision ImageFolder + PIL + RandomResizedCrop(224) + flip + ToTensor +
  Normalize, default collate (the seed's section 4.2);
- template: src ImageFolderDataset, uint8 decode (torchvision.io) + the same crop and flip in
  uint8, default collate of uint8, one per-batch float conversion + normalisation.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from collections.abc import Callable, Iterable
from pathlib import Path

import torch
from PIL import Image
from torch.utils.data import DataLoader
from torchvision import datasets, transforms
from torchvision.transforms import v2

from src.data.datasets.imagefolder import ImageFolderDataset
from src.data.transforms import Normalizer

MEAN, STD = [0.485, 0.456, 0.406], [0.229, 0.224, 0.225]


def write_images(src: Path, out: Path, count: int) -> None:
    """`count` 500x375 JPEGs (q90) in out/train/<class>/, upscaled from the demo images."""
    files = sorted(src.rglob("*.jpg"))[:count]
    if len(files) < count:
        raise SystemExit(f"need {count} demo JPEGs under {src}; run `make data` first")
    for i, path in enumerate(files):
        target = out / "train" / path.parent.name / f"{i:05d}.jpg"
        target.parent.mkdir(parents=True, exist_ok=True)
        Image.open(path).convert("RGB").resize((500, 375), Image.BICUBIC).save(target, quality=90)


def images_per_s(batches: Iterable, finish: Callable[[object], torch.Tensor]) -> float:
    """Images/s over one pass, `finish` turning each batch into normalised float inputs."""
    start, seen = time.perf_counter(), 0
    for batch in batches:
        seen += len(finish(batch))
    return seen / (time.perf_counter() - start)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--demo", default="data/demo/imagefolder")
    parser.add_argument("--images", type=int, default=1024)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--batch-size", type=int, default=64)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        write_images(Path(args.demo), root, args.images)
        tutorial = datasets.ImageFolder(str(root / "train"), transform=transforms.Compose([
            transforms.RandomResizedCrop(224), transforms.RandomHorizontalFlip(),
            transforms.ToTensor(), transforms.Normalize(MEAN, STD),
        ]))  # fmt: skip
        template = ImageFolderDataset(str(root), "train", transform=v2.Compose([
            v2.RandomResizedCrop(224, antialias=True), v2.RandomHorizontalFlip(),
        ]))  # fmt: skip
        normalize = Normalizer(MEAN, STD)
        pipelines = {
            "tutorial": (tutorial, lambda b: b[0]),
            "template": (template, lambda b: normalize(b[0])),
        }
        rates: dict[str, list[float]] = {name: [] for name in pipelines}
        for _ in range(args.rounds):
            for name, (dataset, finish) in pipelines.items():
                loader = DataLoader(dataset, batch_size=args.batch_size, shuffle=True,
                                    num_workers=args.workers, persistent_workers=True)  # fmt: skip
                images_per_s(loader, finish)  # warm-up pass: worker start-up, page cache
                rates[name].append(images_per_s(loader, finish))
    best = {name: max(values) for name, values in rates.items()}
    print(f"| pipeline ({args.images} x 500x375 JPEG, batch {args.batch_size}, "
          f"{args.workers} workers) | images/s (best of {args.rounds}) | ratio |")  # fmt: skip
    print("|---|---|---|")
    for name, rate in best.items():
        print(f"| {name} | {rate:.0f} | {rate / best['tutorial']:.2f}x |")


if __name__ == "__main__":
    main()
