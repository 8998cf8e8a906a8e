"""Which samples a batch holds, carried beside it from the dataset to the loop.

When the run asks for it (trainer.record_samples, or a stream that must know what an
interrupted epoch already used), each sample leaves the dataset as `Tagged(sample, index)`;
the workers' collate (engine/data/batch_stages.py) strips the tags and appends one
`SampleIds` after the batch's fields, and `BatchMover` hands it to the loop as
`DeviceBatch.ids`. Off, nothing is tagged: the samples and batches are the plain ones.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from torch.utils.data import Dataset

from engine.measure.stages import split_times


class Tagged:
    """One sample with its index in the dataset (a stream: in its split)."""

    __slots__ = ("index", "sample")

    def __init__(self, sample: Any, index: int) -> None:
        self.sample, self.index = sample, index

    def __reduce__(self) -> tuple[type, tuple[Any, int]]:  # from a worker to the main process
        return (Tagged, (self.sample, self.index))


class SampleIds:
    """The dataset indices of a batch's samples, in batch order. pin_memory passes it as is."""

    __slots__ = ("indices",)

    def __init__(self, indices: Sequence[int]) -> None:
        self.indices = [int(i) for i in indices]

    def __reduce__(self) -> tuple[type, tuple[list[int]]]:
        return (SampleIds, (self.indices,))

    def __len__(self) -> int:
        return len(self.indices)


def split_ids(batch: Any) -> tuple[Any, SampleIds | None]:
    """The batch's fields without its trailing `SampleIds` and stage times (a training's
    pipeline timing takes those first: engine/training/pipeline_timing.py), and the ids
    (None: untagged)."""
    batch = split_times(batch)[0]
    if isinstance(batch, tuple | list) and batch and isinstance(batch[-1], SampleIds):
        return batch[:-1], batch[-1]
    return batch, None


def tag_samples(dataset: Dataset) -> None:
    """Ask `dataset` (a StreamDataset, or the engine's SeededSamples around a map-style one)
    to tag every sample it yields from now on."""
    dataset.tags_samples = True  # type: ignore[attr-defined]
