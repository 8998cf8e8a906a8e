"""End-to-end CPU training speed: ResNet-18 on 64 px crops of the 500x375 JPEGs, the tutorial's
loop (its float pipeline, fp32, 2 workers) against the template's train step (the one
`mode=benchmark benchmark.compute=model` runs: BatchMover + autocast + backward + step)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import torch
import torchvision
from torch import nn

from bench.image_rows import tutorial_loader
from bench.template import build, template_config
from bench.timing import Candidate
from engine.data.loaders import endless
from engine.modes.benchmark import train_step
from engine.training.batches import mover_for
from engine.training.optimization import build_optimizer
from src.step import TrainStep

CROP = 64
CACHE_SIDE = 80  # pre-resized short side for 64 px crops (64 / 0.8)
LR = 0.1  # SGD, momentum 0.9, for every row


def tutorial_training(root: Path, batch: int, workers: int) -> Candidate:
    """The tutorial loop: float batches from the tutorial pipeline straight into the model."""
    steps: list[Any] = []

    def start() -> Iterator[Any]:
        loader = tutorial_loader(root, "train", batch, workers, crop=CROP)
        model = torchvision.models.resnet18(num_classes=len(loader.dataset.classes))
        optimizer = torch.optim.SGD(model.parameters(), lr=LR, momentum=0.9)
        model.train()

        def step(inputs: torch.Tensor, labels: torch.Tensor) -> None:
            loss = nn.functional.cross_entropy(model(inputs), labels)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()

        steps[:] = [step]
        return endless(loader)

    def finish(batch: Any) -> None:
        steps[0](*batch)

    return Candidate("tutorial loop (fp32, PIL float pipeline, 2 workers)", start, finish)


def template_training(name: str, *overrides: str) -> Candidate:
    """The template's train step on the configured data (ResNet-18, SGD, 64 px crops)."""
    cfg = template_config(
        "model=resnet18",
        "optimizer=sgd",
        f"optimizer.lr={LR}",
        "transforms=imagenet",
        f"transforms.train.0.size={CROP}",
        "trainer.device=cpu",
        *overrides,
    )
    steps: list[Any] = []

    def start() -> Iterator[Any]:
        parts = build(cfg)
        optimizer = build_optimizer(cfg.optimizer, parts.model)
        step = train_step(parts, optimizer, TrainStep)
        move = mover_for(parts)  # in `finish`: waiting counts the loader only, as in the loop
        steps[:] = [lambda batch: step(move(batch))]
        return endless(parts.train_loader)

    def finish(batch: Any) -> None:
        steps[0](batch)

    return Candidate(name, start, finish)


def training_rows(root: Path, cache: Path, batch: int, workers: int) -> list[Candidate]:
    size = f"loader.batch_size={batch}"
    return [
        tutorial_training(root, batch, workers),
        template_training(
            "template, JPEG files, fp32", "dataset=imagefolder", f"dataset.root={root}", size
        ),
        template_training(
            "template, 80 px cache, fp32", "dataset=cache", f"dataset.root={cache}", size
        ),
        template_training(
            "template, 80 px cache, bf16 autocast + channels_last",
            *("dataset=cache", f"dataset.root={cache}", size, "trainer.precision=bf16-mixed"),
            "trainer.channels_last=true",
        ),
    ]
