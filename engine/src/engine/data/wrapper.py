"""A dataset around another one, for what the loaders add per sample (seeding, indices)."""

from __future__ import annotations

from typing import Any

from torch.utils.data import Dataset


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
