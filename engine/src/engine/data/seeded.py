"""Per-sample randomness that depends on (seed, epoch, index), not on which worker loads it.

Random augmentations then repeat exactly under the same seed whatever loader.num_workers is,
differ between samples, workers and epochs, and a resumed run draws the crops it would have.
The wrapper is also where each worker marks the sample it reads (engine/data/in_flight.py).
"""

from __future__ import annotations

from typing import Any

import torch
from torch.utils.data import Dataset, IterableDataset

from engine.core.seeding import derive_seed
from engine.data.bad_samples import BadSample
from engine.data.in_flight import ReadingSlots
from engine.data.sample_ids import SampleIds, Tagged
from engine.data.samplers import Draw
from engine.data.wrapper import DatasetWrapper
from engine.measure.stages import SUMS


class SeededSamples(DatasetWrapper):
    """Wraps a map-style dataset: every fetch runs under torch's RNG seeded from
    (seed, epoch, index), restoring the caller's RNG afterwards. Attributes pass through.
    A dataset with `draws_random = False` (no random transform) is fetched without the swap."""

    def __init__(self, dataset: Dataset, seed: int) -> None:
        super().__init__(dataset)
        self.seed = seed
        # shared memory: persistent workers see set_epoch without being restarted
        self._epoch = torch.zeros((), dtype=torch.int64).share_memory_()
        self.reading = ReadingSlots()
        self.tags_samples = False  # engine.data.sample_ids: set before the workers start

    def set_epoch(self, epoch: int) -> None:
        """Select the epoch whose random draws the next fetches use."""
        self._epoch.fill_(epoch)
        self.dataset.set_epoch(epoch)

    def _fetch(self, key: Any, fetch: Any, first_index: int, *seed_parts: int) -> Any:
        slot = self.reading.start(first_index)
        if not self.dataset.draws_random:  # nothing to seed: skip the swap
            with SUMS.timed("fetch"):  # the pipeline's stages (engine/measure/stages.py)
                item = fetch(key)
        else:
            with torch.random.fork_rng(devices=[]):
                # the CPU generator only (what transforms draw from): torch.manual_seed would
                # also reseed every CUDA device, unrestored, and costs 80 us against 3 us
                torch.default_generator.manual_seed(
                    derive_seed(self.seed, int(self._epoch), *seed_parts)
                )
                with SUMS.timed("fetch"):
                    item = fetch(key)
        self.reading.done(slot)
        return item

    def __getitem__(self, index: int) -> Any:
        # a repeated draw (samplers.Draw) of the same index gets its own augmentation
        repeat = (index.occurrence,) if isinstance(index, Draw) else ()
        item = self._fetch(index, self.dataset.__getitem__, index, index, *repeat)
        # a bad sample (on_error=skip) keeps its own record: left out of the batch, no row
        return (
            Tagged(item, index) if self.tags_samples and not isinstance(item, BadSample) else item
        )

    def __getitems__(self, indices: list[int]) -> Any:
        if not self.dataset.returns_batches:
            return [self[i] for i in indices]
        batched = self.dataset.__getitems__
        # one batch, one draw: seeded by its first index and size (the same batches every run)
        batch = self._fetch(indices, batched, indices[0], indices[0], len(indices))
        return (*batch, SampleIds(indices)) if self.tags_samples else batch

    def in_flight(self, pids: set[int] | None = None) -> list[str]:
        """The samples workers were reading and had not finished (see ReadingSlots)."""
        return self.reading.in_flight(self.dataset.get_filename, pids)


def seeded(dataset: Dataset, seed: int) -> Dataset:
    """`SeededSamples` around a map-style dataset; streams seed themselves per epoch."""
    return dataset if isinstance(dataset, IterableDataset) else SeededSamples(dataset, seed)
