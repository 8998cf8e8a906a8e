"""In-memory tensors from a `.pt` dict or an `.npz` file (arrays named by dataset.inputs_key and
dataset.labels_key; images N x C x H x W, or N x H x W x C with dataset.layout=nhwc), sliced per
batch."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Literal

import numpy as np
import torch

from engine.core.bounds import Split
from engine.data.datasets.base import MapDataset, Transform
from engine.data.listing import unique_classes

log = logging.getLogger(__name__)


LAYOUTS = ("nchw", "nhwc")
CHANNELS = (1, 3, 4)  # the channel counts of images: grey, RGB, RGBA


def _check_layout(inputs: torch.Tensor, path: Path, layout: str) -> torch.Tensor:
    """4-D `inputs` as N x C x H x W: permuted from N x H x W x C with layout=nhwc; under
    nchw, images whose last axis looks like channels are refused (they would read as H
    channels far from here, at the normalisation)."""
    if layout not in LAYOUTS:
        raise ValueError(f"dataset.layout={layout!r}: expected one of {', '.join(LAYOUTS)}.")
    shape = tuple(inputs.shape)
    if layout == "nhwc":
        if inputs.ndim != 4:
            raise ValueError(
                f"{path}: dataset.layout=nhwc permutes images N x H x W x C, but the inputs "
                f"have shape {shape}; set dataset.layout=nchw for them."
            )
        return inputs.permute(0, 3, 1, 2).contiguous()
    if inputs.ndim == 4:
        _, c, h, w = shape
        if w in CHANNELS and c not in CHANNELS and min(c, h) > w:
            raise ValueError(
                f"{path}: inputs of shape {shape} look like N,H,W,C (N x {c} x {h} x {w} "
                f"pixels, not {c} channels): set dataset.layout=nhwc."
            )
    return inputs


def _array(content: dict, key: str, name: str, path: Path) -> torch.Tensor:
    """Array `key` of the file's `content`; missing: one line listing the keys it has."""
    if key not in content:
        raise ValueError(
            f"{path}: no array {key!r} (dataset.{name}_key); the file has {sorted(content)}: "
            f"set dataset.{name}_key to one of them."
        )
    return content[key]


def load_tensor_file(
    path: str | Path,
    inputs_key: str = "inputs",
    labels_key: str = "labels",
    layout: str = "nchw",
) -> tuple[torch.Tensor, torch.Tensor, list[str] | None]:
    """(inputs N x C x H x W or N x D, labels, classes or None) from a `.pt` dict or an `.npz`
    (arrays `inputs_key`, `labels_key`, optional `classes`), without running pickles."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"{path} does not exist (dataset.path / val_path / test_path).")
    if path.suffix == ".npz":
        with np.load(path, allow_pickle=False) as data:
            content = {key: data[key] for key in data.files}
        classes = content.pop("classes", None)
        content = {k: torch.from_numpy(v) for k, v in content.items()}
        classes = [str(c) for c in classes] if classes is not None else None
    else:
        content = torch.load(path, map_location="cpu", weights_only=True)
        if not isinstance(content, dict):
            raise ValueError(
                f"{path}: expected a dict with {inputs_key!r} and {labels_key!r}, found a "
                f"{type(content).__name__}."
            )
        classes = content.get("classes")
    if classes is not None:  # class names as every kind has them (NFC, each once, no control)
        classes = unique_classes(
            list(classes), f"{path}: its 'classes'", at=lambda i: f"{path}: classes[{i}]"
        )
    inputs = _array(content, inputs_key, "inputs", path)
    labels = _array(content, labels_key, "labels", path)
    if labels.ndim != 1 or labels.dtype.is_floating_point or len(labels) != len(inputs):
        raise ValueError(
            f"{path}: {labels_key!r} (the labels) must be integers of shape (N,) with N = "
            f"len(inputs) = {len(inputs)}; got dtype {labels.dtype}, shape {tuple(labels.shape)}."
        )
    inputs = _check_layout(inputs, path, layout)
    if inputs.dtype == torch.uint8 and inputs.ndim != 4:
        raise ValueError(
            f"{path}: uint8 {inputs_key!r} (the inputs) must be images N x C x H x W, got "
            f"{tuple(inputs.shape)}."
        )
    if inputs.dtype not in (torch.uint8, torch.float32):
        log.info("%s: %s inputs converted to float32 (the model's dtype)", path, inputs.dtype)
        inputs = inputs.float()
    return inputs, labels.long(), classes


class TensorFileDataset(MapDataset):
    """One split of a tensor file; uint8 images (N x C x H x W) or float features (N x D).

    The val split is a second file (`val_path`) or a seeded fraction (`val_fraction`); the test
    split (mode=eval only) is the file `test_path`. `__getitems__` slices whole batches, so the
    DataLoader skips per-item collation.
    """

    splits = ("train", "val", "test")
    returns_batches = True
    in_memory = True  # loader.num_workers=null means 0 (engine/data/resolve_loader.py)

    def __init__(
        self,
        split: str,
        path: str,
        val_path: str | None = None,
        val_fraction: Split | None = None,
        split_seed: int = 0,
        test_path: str | None = None,
        transform: Transform | None = None,
        classes: Sequence[str] | None = None,
        inputs_key: str = "inputs",
        labels_key: str = "labels",
        layout: Literal["nchw", "nhwc"] = "nchw",
    ) -> None:
        if (val_path is None) == (val_fraction is None):
            raise ValueError(
                "dataset: set exactly one of dataset.val_path (a second file) or "
                f"dataset.val_fraction (0 < f < 1); got {val_path=}, {val_fraction=}."
            )
        if split == "test" and test_path is None:
            raise FileNotFoundError(
                "dataset.test_path is null: set it to the tensor file of the test split (the "
                "same format as dataset.path), or evaluate eval.split=val."
            )
        if classes is not None:  # dataset.classes, or the train split's (val, test)
            classes = unique_classes(classes)
        file = {"val": val_path, "test": test_path}.get(split) or path
        self.inputs, self.labels, file_classes = load_tensor_file(
            file, inputs_key, labels_key, layout
        )
        if classes is not None and file_classes is not None and list(file_classes) != list(classes):
            raise ValueError(
                f"{file}: its classes {list(file_classes)} differ from the train split's "
                f"{list(classes)}: use files of one class list."
            )
        if val_fraction is not None and split != "test":
            if not 0 < val_fraction < 1:
                raise ValueError(f"dataset.val_fraction must be in (0, 1), got {val_fraction}.")
            generator = torch.Generator().manual_seed(split_seed)
            order = torch.randperm(len(self.labels), generator=generator)
            n_val = max(1, round(len(order) * val_fraction))
            keep = order[:n_val] if split == "val" else order[n_val:]
            self.inputs, self.labels = self.inputs[keep], self.labels[keep]
        if transform is not None and self.inputs.dtype != torch.uint8:
            raise ValueError(
                f"{file}: holds {self.inputs.dtype} features {tuple(self.inputs.shape)}; image "
                "transforms do not apply. Use transforms=none for feature vectors."
            )
        n_classes = int(self.labels.max()) + 1
        given = classes if classes is not None else file_classes
        self.classes = list(given if given is not None else [str(i) for i in range(n_classes)])
        if n_classes > len(self.classes) or int(self.labels.min()) < 0:
            raise ValueError(
                f"{file}: labels span {int(self.labels.min())}..{n_classes - 1}, but there are "
                f"{len(self.classes)} classes {self.classes}."
            )
        self.targets = self.labels.numpy()
        self.transform = transform

    def __len__(self) -> int:
        return len(self.labels)

    def __getitem__(self, index: int) -> tuple[torch.Tensor, int]:
        x = self.inputs[index]
        return (self.transform(x) if self.transform else x), int(self.labels[index])

    @property
    def draws_random(self) -> bool:
        """Whether a fetch draws random numbers (only through a transform): engine/data/seeded.py
        seeds the fetches that do."""
        return self.transform is not None

    def __getitems__(self, indices: list[int]) -> tuple[torch.Tensor, torch.Tensor]:
        idx = torch.from_numpy(np.asarray(indices, dtype=np.int64))  # 3x faster than as_tensor
        x = self.inputs.index_select(0, idx)
        if self.transform is not None:
            x = torch.stack([self.transform(item) for item in x])
        return x, self.labels.index_select(0, idx)
