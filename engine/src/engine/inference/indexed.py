"""Samples that keep their index through the loader, so every output of an eval or predict pass
names its file, also when dataset.decode.on_error=skip leaves unreadable samples out of a batch."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import torch
from torch.utils.data import DataLoader, Dataset, SequentialSampler, default_collate

from engine.data.bad_samples import BadSample
from engine.data.collate import already_batched
from engine.data.loader_settings import LoaderSettings
from engine.data.loaders import make_loader
from engine.data.wrapper import DatasetWrapper


class Indexed(DatasetWrapper):
    """Wraps a map-style dataset: a sample comes as (sample, index), a batch of
    `returns_batches` datasets as (batch, indices); a `BadSample` passes as it is (the skip
    machinery drops it). Attributes pass through, but one: an eval or predict pass decodes in
    its workers whatever dataset.decode.device says (its batches carry their indices, and one
    pass gains little from a batched decode)."""

    decode_device = "cpu"

    def __getitem__(self, index: int) -> Any:
        sample = self.dataset[index]
        return sample if isinstance(sample, BadSample) else (sample, index)

    def __getitems__(self, indices: list[int]) -> Any:
        if not self.dataset.returns_batches:
            return [self[i] for i in indices]
        return self.dataset.__getitems__(indices), torch.tensor(indices)


class IndexedCollate:
    """Collates (sample, index) pairs with `collate` into (*batch, indices): the indices ride
    last, after the inputs, labels and any extras (lengths, mask)."""

    def __init__(self, collate: Callable[[Any], Any], batched: bool) -> None:
        self.collate, self.batched = collate, batched

    def __call__(self, items: Any) -> tuple[Any, ...]:
        if self.batched:  # (a whole batch, its indices) from Indexed.__getitems__
            batch, indices = items
            return (*self.collate(batch), indices)
        samples, indices = zip(*items, strict=True)
        return (*self.collate(list(samples)), torch.tensor(indices))


def indexed_loader(
    dataset: Dataset, settings: LoaderSettings, split: str, report_dir: Path
) -> DataLoader:
    """A loader over every sample of `dataset` in order, batches ending with their indices;
    unreadable samples follow dataset.decode.on_error (skip: listed in report_dir/bad_samples.csv)."""
    collate = settings.collate_fn
    if collate is None:
        collate = already_batched if dataset.returns_batches else default_collate
    indexed = replace(settings, collate_fn=IndexedCollate(collate, dataset.returns_batches))
    order = SequentialSampler(dataset)
    return make_loader(Indexed(dataset), indexed, order, False, split, report_dir)
