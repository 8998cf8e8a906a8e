"""One source of a mix's split on its own: what its per-source validation (val/<source>/*)
reads, through the same seeded samples as the whole split."""

from __future__ import annotations

from typing import Any

import numpy as np
from torch.utils.data import Dataset

from engine.data.bad_samples import BadSample
from engine.data.mix import Stratum
from engine.data.wrapper import DatasetWrapper


class SourceView(DatasetWrapper):
    """Indices [start, stop) of `dataset` (a mix, or SeededSamples around one) as 0..size-1;
    the rest of the contract passes through (classes, on_error, ...)."""

    sources: tuple[Stratum, ...] = ()  # one source: no mix inside
    epoch_samples = None

    def __init__(self, dataset: Dataset, stratum: Stratum) -> None:
        super().__init__(dataset)
        self.stratum = stratum

    def __len__(self) -> int:
        return self.stratum.size

    def _at(self, index: int) -> int:
        if not 0 <= index < self.stratum.size:
            raise IndexError(f"index {index} is outside source {self.stratum.name!r}")
        return self.stratum.start + int(index)

    def __getitem__(self, index: int) -> Any:
        return self.dataset[self._at(index)]  # type: ignore[index]

    @property
    def targets(self) -> np.ndarray | None:
        targets = self.dataset.targets  # type: ignore[attr-defined]
        return None if targets is None else targets[self.stratum.start : self.stratum.stop]

    def get_filename(self, index: int) -> str | None:
        return self.dataset.get_filename(self._at(index))  # type: ignore[attr-defined]

    def check_sample(self, index: int) -> BadSample | None:
        return self.dataset.check_sample(self._at(index))  # type: ignore[attr-defined]

    def sample_source(self, index: int) -> tuple[str, int]:
        return self.stratum.name, int(index)
