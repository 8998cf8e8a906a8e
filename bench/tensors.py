"""In-memory tensors: torch's default DataLoader(TensorDataset) (per-item fetch + default
collate, in the main process and with workers), the template's `dataset=tensor` path with its
default worker count, and the ceiling: a raw randperm + index_select loop."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import torch
from torch.utils.data import DataLoader, TensorDataset

from bench.template import template_candidate, template_config
from bench.timing import Candidate, touch
from engine.data.loaders import endless

SHAPE = (3, 32, 32)  # CIFAR-sized uint8 images


def write_tensors(path: Path, count: int, seed: int) -> Path:
    """`count` random uint8 images with labels, as the `.pt` dict `dataset=tensor` reads."""
    if path.is_file() and len(torch.load(path, weights_only=True)["labels"]) == count:
        return path
    generator = torch.Generator().manual_seed(seed)
    inputs = torch.randint(0, 256, (count, *SHAPE), dtype=torch.uint8, generator=generator)
    labels = torch.randint(0, 10, (count,), generator=generator)
    path.parent.mkdir(parents=True, exist_ok=True)
    torch.save({"inputs": inputs, "labels": labels}, path)
    return path


def tensor_rows(path: Path, batch: int) -> list[Candidate]:
    data = torch.load(path, weights_only=True)
    inputs, labels = data["inputs"], data["labels"]

    def default(workers: int) -> Candidate:
        def start() -> Iterator[Any]:
            dataset = TensorDataset(inputs, labels)
            return endless(DataLoader(dataset, batch_size=batch, shuffle=True, num_workers=workers))

        name = (
            f"DataLoader(TensorDataset), {workers} workers"
            if workers
            else ("DataLoader(TensorDataset), default collate")
        )
        return Candidate(name, start, lambda b: touch(b[0]))

    def raw() -> Iterator[Any]:
        while True:
            order = torch.randperm(len(labels))
            for i in range(0, len(order) - batch + 1, batch):
                index = order[i : i + batch]
                yield inputs.index_select(0, index), labels.index_select(0, index)

    cfg = template_config(
        "dataset=tensor",
        f"dataset.path={path}",
        "dataset.val_path=null",
        "dataset.val_fraction=0.1",
        "transforms=none",
        f"loader.batch_size={batch}",
        "trainer.device=cpu",
    )
    return [
        default(0),
        default(2),
        template_candidate("template dataset=tensor (workers: default -> 0)", cfg, "train", False),
        Candidate("raw randperm + index_select (ceiling)", raw, lambda b: touch(b[0])),
    ]
