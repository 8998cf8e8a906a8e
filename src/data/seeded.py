"""Per-sample randomness that depends on (seed, epoch, index), not on which worker loads it.

Random augmentations then repeat exactly under the same seed whatever loader.num_workers is,
differ between samples, workers and epochs, and a resumed run draws the crops it would have.
The wrapper also records which sample each worker is reading, so a hung or dead worker can be
reported with the file it was on.
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np
import torch
from torch.utils.data import Dataset, IterableDataset, get_worker_info

from src.data.samplers import Draw
from src.utils.seeding import derive_seed
from src.utils.text import shown

_SLOTS = 256  # reading-slots: one per worker id (modulo)


class SeededSamples(Dataset):
    """Wraps a map-style dataset: every fetch runs under torch's RNG seeded from
    (seed, epoch, index), restoring the caller's RNG afterwards. Attributes pass through.
    A dataset with `draws_random = False` (no random transform) is fetched without the swap."""

    def __init__(self, dataset: Dataset, seed: int) -> None:
        self.dataset = dataset
        self.seed = seed
        # shared memory: persistent workers see set_epoch without being restarted
        self._epoch = torch.zeros((), dtype=torch.int64).share_memory_()
        self._reading = torch.full((_SLOTS,), -1, dtype=torch.int64).share_memory_()
        self._pids = torch.zeros(_SLOTS, dtype=torch.int64).share_memory_()  # reader's pid

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__") or name in ("dataset", "_views"):  # unpickling: not yet set
            raise AttributeError(name)
        return getattr(self.dataset, name)

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state.pop("_views", None)  # per-process views of the shared slots, made on first use
        return state

    def _slots(self) -> tuple[np.ndarray, np.ndarray]:
        """numpy views of the shared reading/pid slots (a write costs ~0.1 us, not ~2 us)."""
        if "_views" not in self.__dict__:
            self._views = (self._reading.numpy(), self._pids.numpy())
        return self._views

    def __len__(self) -> int:
        return len(self.dataset)  # type: ignore[arg-type]

    def set_epoch(self, epoch: int) -> None:
        """Select the epoch whose random draws the next fetches use."""
        self._epoch.fill_(epoch)
        self.dataset.set_epoch(epoch)

    def _fetch(self, key: Any, fetch: Any, first_index: int, *seed_parts: int) -> Any:
        info = get_worker_info()
        slot = info.id % _SLOTS if info is not None else -1
        if slot >= 0:  # workers only: a fetch in the main process raises right where it fails
            reading, pids = self._slots()
            reading[slot], pids[slot] = first_index, os.getpid()
        if not self.dataset.draws_random:  # nothing to seed: skip the swap
            item = fetch(key)
        else:
            with torch.random.fork_rng(devices=[]):
                # the CPU generator only (what transforms draw from): torch.manual_seed would
                # also reseed every CUDA device, unrestored, and costs 80 us against 3 us
                torch.default_generator.manual_seed(
                    derive_seed(self.seed, int(self._epoch), *seed_parts)
                )
                item = fetch(key)
        if slot >= 0:  # left set when the fetch raised: that sample is the culprit
            self._slots()[0][slot] = -1
        return item

    def __getitem__(self, index: int) -> Any:
        # a repeated draw (samplers.Draw) of the same index gets its own augmentation
        repeat = (index.occurrence,) if isinstance(index, Draw) else ()
        return self._fetch(index, self.dataset.__getitem__, index, index, *repeat)

    def __getitems__(self, indices: list[int]) -> Any:
        if not self.dataset.returns_batches:
            return [self[i] for i in indices]
        batched = self.dataset.__getitems__
        # one batch, one draw: seeded by its first index and size (the same batches every run)
        return self._fetch(indices, batched, indices[0], indices[0], len(indices))

    def in_flight(self, pids: set[int] | None = None) -> list[str]:
        """The samples workers were reading and had not finished (file names where known);
        only those of processes `pids` when given (e.g. the workers that died)."""
        busy = [
            index
            for index, pid in zip(self._reading.tolist(), self._pids.tolist(), strict=True)
            if index >= 0 and (pids is None or pid in pids)
        ]
        names = {i: self.dataset.get_filename(i) for i in busy}
        return [f"sample {i}" + (f" ({shown(names[i])})" if names[i] else "") for i in busy]


def seeded(dataset: Dataset, seed: int) -> Dataset:
    """`SeededSamples` around a map-style dataset; streams seed themselves per epoch."""
    return dataset if isinstance(dataset, IterableDataset) else SeededSamples(dataset, seed)
