"""A dataset around another one, for what the loaders add per sample (seeding, indices), and
a view of some of its samples (one source of a mix, a fold)."""

from __future__ import annotations

from typing import Any

import numpy as np
from torch.utils.data import Dataset

from engine.data.bad_samples import BadSample


class DatasetWrapper(Dataset):
    """Wraps a map-style dataset: its length and every attribute of the dataset contract
    (classes, targets, get_filename, ...) pass through to the wrapped `dataset`."""

    def __init__(self, dataset: Dataset) -> None:
        self.dataset = dataset

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__") or name == "dataset":  # unpickling: not yet set
            raise AttributeError(name)
        return getattr(self.dataset, name)

    def __len__(self) -> int:
        return len(self.dataset)  # type: ignore[arg-type]


class SubsetView(DatasetWrapper):
    """Samples `indices` (a range, or an array) of `dataset` as 0..len-1, with `targets` and
    `blocks` restricted to them and the rest of the contract passed through (classes, on_error,
    ...). `source`: the indices are that source of a mix (its per-source validation,
    val/<source>/*, through the same seeded samples as the whole split), a single source named
    in `sample_source`. `record`: they are a fold of the train split (engine/data/folds.py),
    whose samples keep their own source and which split.csv does not list (fold.json does)."""

    def __init__(
        self,
        dataset: Dataset,
        indices: np.ndarray | range,
        source: str | None = None,
        record: Any = None,
    ) -> None:
        super().__init__(dataset)
        self.indices, self.source, self.record = indices, source, record
        if source is not None:  # one source: no mix inside
            self.sources, self.epoch_samples = (), None
        if record is not None:  # split.csv would list folds, not the drawn split
            self.drawn_split = False

    def __len__(self) -> int:
        return len(self.indices)

    def _at(self, index: int) -> int:
        if not 0 <= index < len(self.indices):
            fold = f"this fold's {len(self.indices)} samples"
            where = fold if self.source is None else f"source {self.source!r}"
            raise IndexError(f"index {index} is outside {where}")
        return int(self.indices[index])

    def __getitem__(self, index: int) -> Any:
        return self.dataset[self._at(index)]  # type: ignore[index]

    def __getitems__(self, indices: list[int]) -> Any:
        if not self.dataset.returns_batches:  # type: ignore[attr-defined]
            return [self[i] for i in indices]
        return self.dataset.__getitems__([self._at(i) for i in indices])  # type: ignore[attr-defined]

    @property
    def targets(self) -> np.ndarray | None:
        targets = self.dataset.targets  # type: ignore[attr-defined]
        return None if targets is None else np.asarray(targets)[self.indices]

    @property
    def blocks(self) -> np.ndarray | None:
        """The dataset's blocks (dataset=parquet's row groups) as positions of this view, whose
        indices ascend; None when it has none (the train order then reads at random)."""
        blocks = getattr(self.dataset, "blocks", None)
        if blocks is None or (np.diff(self.indices) < 0).any():
            return None
        return np.unique(np.searchsorted(self.indices, blocks))

    def get_filename(self, index: int) -> str | None:
        return self.dataset.get_filename(self._at(index))  # type: ignore[attr-defined]

    def check_sample(self, index: int) -> BadSample | None:
        return self.dataset.check_sample(self._at(index))  # type: ignore[attr-defined]

    def sample_source(self, index: int) -> tuple[str, int]:
        """The view's source and the sample's index in it, or (a fold) the dataset's answer
        for the sample (its index in the train split, what a fold's indices refer to)."""
        if self.source is not None:
            return self.source, int(index)
        return self.dataset.sample_source(self._at(index))  # type: ignore[attr-defined]
