"""Train/val transform pipelines (uint8 in, uint8 out) and the one per-batch normalisation."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch
from torchvision.transforms import v2


class Normalizer:
    """Turns a batch into model inputs: uint8 -> float in [0, 1], then (x - mean) / std.

    Applied once per batch after the copy to the device, so workers ship compact uint8
    batches and the arithmetic runs where it is cheapest. Float batches (features) are only
    standardised when `mean`/`std` are given.
    """

    def __init__(self, mean: Sequence[float] | None, std: Sequence[float] | None) -> None:
        if (mean is None) != (std is None):
            raise ValueError("transforms.mean and transforms.std must be set together.")
        self.mean = torch.tensor(mean, dtype=torch.float32) if mean is not None else None
        self.std = torch.tensor(std, dtype=torch.float32) if std is not None else None
        if self.std is not None and bool((self.std <= 0).any()):
            raise ValueError(f"transforms.std must be positive, got {list(std)}.")

    def _stats(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        assert self.mean is not None and self.std is not None
        if x.ndim >= 2 and x.shape[1] != len(self.mean):
            raise ValueError(
                f"transforms.mean/std have {len(self.mean)} values but the inputs have "
                f"{x.shape[1]} channels: pick transforms that match the data (e.g. "
                "transforms=mnist for grey images, transforms=none for features)."
            )
        shape = (1, -1, *([1] * (x.ndim - 2)))
        return self.mean.to(x.device).view(shape), self.std.to(x.device).view(shape)

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        pixels = x.dtype == torch.uint8
        if self.mean is None:
            return x.float().div_(255.0) if pixels else x
        mean, std = self._stats(x)
        # one float copy, then two in-place passes: x * (1 / (255 std)) - mean / std
        scale = 1.0 / (std * 255.0) if pixels else 1.0 / std
        return x.to(torch.float32, copy=True).mul_(scale).sub_(mean / std)

    def denormalize(self, x: torch.Tensor) -> torch.Tensor:
        """Map normalised model inputs back to [0, 1] pixels (for image grids)."""
        if self.mean is not None:
            mean, std = self._stats(x)
            x = x * std + mean
        return x.clamp(0.0, 1.0)


class Pipelines:
    """The `transforms` config group: train and val pipelines plus the normaliser."""

    def __init__(
        self,
        train: Sequence[Callable],
        val: Sequence[Callable],
        mean: Sequence[float] | None = None,
        std: Sequence[float] | None = None,
    ) -> None:
        self.train = v2.Compose(list(train)) if train else None
        self.val = v2.Compose(list(val)) if val else None
        self.normalizer = Normalizer(mean, std)
