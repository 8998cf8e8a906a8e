"""The image-pipeline rows: the tutorial pipeline and the template's paths, per task.

Tutorial = torchvision ImageFolder + PIL + the torchvision.transforms recipe + ToTensor +
Normalize per image, default collate (the pipeline most tutorials teach). Template = the configured
train.py path (`transforms=imagenet`, `dataset=imagefolder` or `dataset=cache`).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import torch
from torch.utils.data import DataLoader
from torchvision import datasets
from torchvision import transforms as T

from bench.template import template_candidate, template_config
from bench.timing import Candidate, touch
from engine.data.datasets.base import MapDataset
from engine.data.loaders import endless

MEAN, STD = [0.485, 0.456, 0.406], [0.229, 0.224, 0.225]
CROP, RESIZE = 224, 256


def tutorial_transform(split: str, crop: int = CROP) -> T.Compose:
    """The classic per-image float pipeline."""
    steps = (
        [T.RandomResizedCrop(crop), T.RandomHorizontalFlip()]
        if split == "train"
        else [T.Resize(round(crop * RESIZE / CROP)), T.CenterCrop(crop)]
    )
    return T.Compose([*steps, T.ToTensor(), T.Normalize(MEAN, STD)])


def tutorial_loader(
    root: Path, split: str, batch: int, workers: int, crop: int = CROP
) -> DataLoader:
    """torchvision ImageFolder of root/split, shuffled for train."""
    dataset = datasets.ImageFolder(str(root / split), transform=tutorial_transform(split, crop))
    return DataLoader(dataset, batch_size=batch, shuffle=split == "train", num_workers=workers)


def tutorial(root: Path, split: str, batch: int, workers: int) -> Candidate:
    def start() -> Iterator[Any]:
        return endless(tutorial_loader(root, split, batch, workers))

    return Candidate("tutorial (PIL, float per image)", start, lambda b: touch(b[0]))


def template_overrides(batch: int, workers: int) -> list[str]:
    """The issue's benchmark command line, less the dataset."""
    return [
        "transforms=imagenet",
        f"loader.num_workers={workers}",
        f"loader.batch_size={batch}",
        "trainer.device=cpu",
    ]


def template_rows(root: Path, split: str, batch: int, workers: int) -> list[Candidate]:
    """The template's path on an ImageFolder: model-ready float inputs and uint8 batches, the
    workers decoding (dataset.decode.device=cpu), and uint8 batches decoded and cropped a batch
    at once in the main process (main: the path of decode_device=cuda, on the CPU)."""
    overrides = ("dataset=imagefolder", f"dataset.root={root}", *template_overrides(batch, workers))
    cfg = template_config(*overrides)
    main = template_config(*overrides, "dataset.decode.device=main")
    return [
        template_candidate("template, normalised float", cfg, split, normalise=True),
        template_candidate("template, uint8 (normalise on device)", cfg, split, normalise=False),
        template_candidate("template, uint8, dataset.decode.device=main", main, split, False),
    ]


def cache_row(cache_dir: Path, split: str, batch: int, workers: int, kind: str) -> Candidate:
    """The template's path on a pre-resized cache (`dataset=cache`), model-ready float."""
    cfg = template_config(
        "dataset=cache", f"dataset.root={cache_dir}", *template_overrides(batch, workers)
    )
    name = f"template, pre-resized cache ({kind}), float"
    return template_candidate(name, cfg, split, normalise=True)


class _ReadyImages(MapDataset):
    """Images that cost nothing to make: a copy of one 3 x 224 x 224 uint8 image per sample."""

    def __init__(self, count: int) -> None:
        self.count = count
        self.image = torch.zeros(3, CROP, CROP, dtype=torch.uint8)

    def __len__(self) -> int:
        return self.count

    def __getitem__(self, index: int) -> tuple[torch.Tensor, int]:
        return self.image.clone(), 0


def loader_floor(count: int, batch: int, workers: int) -> Candidate:
    """What moving ready uint8 crops through DataLoader workers costs by itself (collate into
    shared memory, hand-over, first read): the floor under every worker-based row."""

    def start() -> Iterator[Any]:
        return endless(DataLoader(_ReadyImages(count), batch_size=batch, num_workers=workers))

    return Candidate(
        "floor: DataLoader moving ready uint8 crops (no decode)", start, lambda b: touch(b[0])
    )
