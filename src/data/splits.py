"""Instantiate the `dataset` group once per split."""

from __future__ import annotations

from hydra.utils import instantiate
from omegaconf import DictConfig
from torch.utils.data import Dataset

from src.data.bad_samples import BadSample
from src.data.datasets.base import MapDataset, StreamDataset
from src.data.transforms import Pipelines


def build_splits(cfg: DictConfig, pipelines: Pipelines) -> tuple[Dataset, Dataset]:
    """Train and val datasets; val takes the train split's classes (and vocabulary) to agree."""
    train = instantiate(cfg, split="train", transform=pipelines.train)
    if not isinstance(train, (MapDataset, StreamDataset)):
        raise TypeError(
            f"dataset._target_={cfg._target_} built a {type(train).__name__}, which does not "
            "follow the dataset contract: subclass src.data.datasets.base.MapDataset (indexed "
            "samples) or StreamDataset (a stream); see docs/datasets.md."
        )
    shared = {"classes": train.classes}
    if train.vocab_size is not None:  # token datasets: val ids must fit the train vocabulary
        shared["vocab_size"] = train.vocab_size
    val = instantiate(cfg, split="val", transform=pipelines.val, **shared)
    return train, val


def input_shape(dataset: Dataset) -> tuple[int, ...]:
    """Shape of one model input, read off the first readable sample (after its transform)."""
    for sample in dataset:  # type: ignore[attr-defined]  # map-style: through __getitem__
        if not isinstance(sample, BadSample):  # dataset.on_error=skip: an unreadable file
            return tuple(sample[0].shape)
    raise ValueError("dataset: no sample could be read to find the input shape (all unreadable).")
