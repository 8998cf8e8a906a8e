"""Instantiate the `dataset` group once per split: train and val for training (or, with
`dataset.folds`, a fold of the train split as val: engine/data/folds.py), and any one split
(val or test) on its own, with a checkpoint's classes, for mode=eval."""

from __future__ import annotations

from collections.abc import Sequence

from hydra._internal.utils import _locate  # what instantiate uses (targets checked before)
from hydra.utils import instantiate
from omegaconf import DictConfig
from torch.utils.data import Dataset

from engine.data.bad_samples import BadSample
from engine.data.datasets.base import DatasetHooks, MapDataset, StreamDataset
from engine.data.folds import cut_folds, fold_spec, without_fold_keys
from engine.data.listing import unique_classes
from engine.data.transforms import Pipelines


def _under_contract(dataset: object, cfg: DictConfig) -> None:
    if not isinstance(dataset, (MapDataset, StreamDataset)):
        raise TypeError(
            f"dataset._target_={cfg._target_} built a {type(dataset).__name__}, which does not "
            "follow the dataset contract: subclass engine.api.MapDataset (indexed samples) or "
            "engine.api.StreamDataset (a stream); see the engine manual's datasets.md (make docs "
            "prints where)."
        )


def build_splits(
    cfg: DictConfig, pipelines: Pipelines, folds: bool = True
) -> tuple[Dataset, Dataset]:
    """Train and val datasets; val takes the train split's classes (and vocabulary) to agree.
    With `dataset.folds` (and `folds`: modes reading whole splits pass False), the other
    folds of the train split and fold `dataset.fold` of it, built again with the val pipeline."""
    spec = fold_spec(cfg) if folds else None
    node = without_fold_keys(cfg)
    if node.get("classes") is not None:  # every kind, a project's own too: before any file
        unique_classes(node.classes, multi_label=bool(node.get("multi_label")))
    train = instantiate(node, split="train", transform=pipelines.train)
    _under_contract(train, node)
    if spec is not None:
        return cut_folds(train, instantiate(node, split="train", transform=pipelines.val), spec)
    val = build_split(node, "val", pipelines.val, train.classes, train.vocab_size)
    return train, val


def build_split(
    cfg: DictConfig,
    split: str,
    transform: object,
    classes: Sequence[str],
    vocab_size: int | None = None,
) -> Dataset:
    """One split (val or test) labelled with the train split's `classes` (and `vocab_size`,
    for token datasets). A dataset kind without that split is refused by name, never read
    as another split."""
    kind = _locate(cfg._target_)
    if isinstance(kind, type) and issubclass(kind, DatasetHooks) and split not in kind.splits:
        raise ValueError(
            f"eval.split={split}: dataset._target_={cfg._target_} reads the splits "
            f"{list(kind.splits)} only; evaluate one of those, or use a dataset kind with a test "
            "split (imagefolder: root/test/, csv: test_csv, tensor: test_path)."
        )
    shared = {"classes": list(classes)}
    if vocab_size is not None:  # token datasets: ids must fit the train vocabulary
        shared["vocab_size"] = vocab_size
    node = without_fold_keys(cfg)  # a fold's checkpoint measures the real split
    dataset = instantiate(node, split=split, transform=transform, **shared)
    _under_contract(dataset, node)
    return dataset


def input_shape(dataset: Dataset) -> tuple[int, ...]:
    """Shape of one model input, read off the first readable sample (after its transform)."""
    for sample in dataset:  # type: ignore[attr-defined]  # map-style: through __getitem__
        if not isinstance(sample, BadSample):  # dataset.decode.on_error=skip: an unreadable file
            return tuple(sample[0].shape)
    raise ValueError("dataset: no sample could be read to find the input shape (all unreadable).")
