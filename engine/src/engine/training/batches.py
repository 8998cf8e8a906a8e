"""Getting a batch onto the device in the form the model expects."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager, nullcontext
from typing import TYPE_CHECKING, Any, NamedTuple

import torch
from torch.utils.data import DataLoader

from engine.core.grid import labelled_grid
from engine.data.sample_ids import SampleIds, split_ids
from engine.data.targets import label_text

if TYPE_CHECKING:
    from engine.training.assemble import Components


class _Fields(NamedTuple):
    inputs: torch.Tensor
    labels: torch.Tensor
    extras: tuple[torch.Tensor, ...]  # e.g. lengths and mask from collate=pad


class DeviceBatch(_Fields):
    """A batch on the device: model inputs, labels, and any extra model arguments, which
    unpack as `inputs, labels, extras = batch`. `ids` (not unpacked) are the samples' dataset
    indices when the run tags them (trainer.record_samples), else None."""

    ids: SampleIds | None = None


@contextmanager
def one_thread() -> Iterator[None]:
    """Run torch ops on one intra-op thread for the duration (the count is restored after)."""
    threads = torch.get_num_threads()
    if threads == 1:
        yield
        return
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)


class BatchMover:
    """Moves a (inputs, labels, *extras) batch to the device; normalises the inputs there, once.

    Extras (such as sequence lengths and masks) follow the inputs into `model(inputs, *extras)`.
    With `beside_workers` (loader workers busy the other cores) CPU normalising runs on one
    thread: a two-thread pass then waits for a descheduled thread and spins meanwhile, ~19 ms
    of main-process CPU per 64 x 224 x 224 batch on 2 cores against ~3 ms on one thread; with
    no workers the second core is free and two threads are faster.
    """

    def __init__(
        self,
        device: torch.device,
        normalize: Callable,
        channels_last: bool,
        beside_workers: bool = False,
    ) -> None:
        self.device = device
        self.normalize = normalize
        self.channels_last = channels_last
        self._threads = one_thread if beside_workers and device.type == "cpu" else nullcontext

    def __call__(self, batch: Any) -> DeviceBatch:
        batch, ids = split_ids(batch)
        inputs, labels, *extras = batch
        layout = torch.channels_last if self.channels_last else torch.contiguous_format
        with self._threads():
            inputs = self.normalize(inputs.to(self.device, non_blocking=True), layout)
        if self.channels_last and inputs.ndim == 4:  # a no-op when the normaliser wrote NHWC
            inputs = inputs.contiguous(memory_format=layout)
        moved = DeviceBatch(
            inputs,
            labels.to(self.device, non_blocking=True),
            tuple(e.to(self.device, non_blocking=True) for e in extras),
        )
        if ids is not None:
            moved.ids = ids
        return moved


def mover_for(parts: Components, channels_last: bool | None = None) -> BatchMover:
    """The BatchMover of a run's parts (its device, normaliser, layout and worker count)."""
    layout = parts.settings.channels_last if channels_last is None else channels_last
    workers = parts.train_loader.num_workers > 0
    return BatchMover(parts.device, parts.pipelines.normalizer, layout, beside_workers=workers)


def batches_per_epoch(loader: DataLoader, limit: int | None) -> int | None:
    """Batches one pass yields (capped by `limit`); None when the loader has no length."""
    try:
        n = len(loader)
    except TypeError:  # an iterable dataset without __len__
        return limit
    return n if limit is None else min(n, limit)


def batch_grid(
    batch: DeviceBatch, normalizer: Any, classes: list[str], most: int = 64
) -> torch.Tensor | None:
    """The first `most` images of `batch` as the model sees them, de-normalised by
    `normalizer`, each tile over its class name (multi-label: its classes); None when the
    inputs are not 1- or 3-channel images (features, tokens)."""
    inputs = batch.inputs
    if inputs.ndim != 4 or inputs.shape[1] not in (1, 3):
        return None
    names = [label_text(label, classes) for label in batch.labels[:most].cpu().numpy()]
    return labelled_grid(normalizer.denormalize(inputs[:most]), names)
