"""torchvision's built-in datasets (CIFAR-10, MNIST, FashionMNIST) as uint8 CHW tensors.

The files are read by torchvision's own classes (so results compare with published work);
samples skip the PIL round trip: the arrays torchvision loads are indexed directly.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch
from torchvision import datasets

from engine.data.datasets.base import MapDataset, Transform

BUILTIN = {
    "cifar10": datasets.CIFAR10,
    "mnist": datasets.MNIST,
    "fashion_mnist": datasets.FashionMNIST,
}


class TorchvisionBuiltin(MapDataset):
    """One split (train / val = the official test split) of a torchvision dataset."""

    def __init__(
        self,
        split: str,
        name: str,
        root: str,
        download: bool,
        transform: Transform | None = None,
        classes: Sequence[str] | None = None,
    ) -> None:
        if name not in BUILTIN:
            raise ValueError(f"dataset.name={name!r}; expected one of {sorted(BUILTIN)}.")
        try:
            base = BUILTIN[name](root, train=split == "train", download=download)
        except RuntimeError as err:
            raise FileNotFoundError(
                f"dataset.root={root}: no usable {name} files ({err}). Run once with "
                f"dataset.download=true where the internet is reachable, or copy the "
                f"official files into {root} (the layout torchvision.datasets expects)."
            ) from err
        data = torch.as_tensor(np.asarray(base.data))
        # CIFAR keeps N x H x W x C, MNIST N x H x W: make both N x C x H x W, uint8.
        self.images = data.permute(0, 3, 1, 2) if data.ndim == 4 else data.unsqueeze(1)
        self.targets = np.asarray(base.targets, dtype=np.int64)
        self.classes = list(classes) if classes is not None else list(base.classes)
        self.transform = transform

    def __len__(self) -> int:
        return len(self.targets)

    def __getitem__(self, index: int) -> tuple[torch.Tensor, int]:
        image = self.images[index]
        return (self.transform(image) if self.transform else image), int(self.targets[index])
