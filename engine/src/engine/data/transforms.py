"""Train/val transform pipelines (uint8 in, uint8 out) and the one per-batch normalisation."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

import torch
from torchvision.transforms import v2

from engine.data.buffers import BufferPool
from engine.measure.stages import SUMS


class Normalizer:
    """Turns a batch into model inputs: uint8 -> float in [0, 1], then (x - mean) / std.

    Applied once per batch after the copy to the device, so workers ship compact uint8
    batches and the arithmetic runs where it is cheapest. Float batches (features) are only
    standardised when `mean`/`std` are given. On the CPU the results are written into
    recycled buffers (engine/data/buffers.py): fresh pages would cost 5x the arithmetic.
    """

    def __init__(self, mean: Sequence[float] | None, std: Sequence[float] | None) -> None:
        if (mean is None) != (std is None):
            raise ValueError("transforms.mean and transforms.std must be set together.")
        self.mean = torch.tensor(mean, dtype=torch.float32) if mean is not None else None
        self.std = torch.tensor(std, dtype=torch.float32) if std is not None else None
        if self.std is not None and bool((self.std <= 0).any()):
            raise ValueError(f"transforms.std must be positive, got {list(std)}.")
        self._pool = BufferPool()
        self._on_device: dict[torch.device, tuple[torch.Tensor, torch.Tensor]] = {}

    def _stats(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        assert self.mean is not None and self.std is not None
        if x.ndim >= 2 and x.shape[1] != len(self.mean):
            raise ValueError(
                f"transforms.mean/std have {len(self.mean)} values but the inputs have "
                f"{x.shape[1]} channels: pick transforms that match the data (e.g. "
                "transforms=mnist for grey images, transforms=none for features)."
            )
        shape = (1, -1, *([1] * (x.ndim - 2)))
        if x.device not in self._on_device:  # one copy per device, not a small copy per batch
            self._on_device[x.device] = (self.mean.to(x.device), self.std.to(x.device))
        mean, std = self._on_device[x.device]
        return mean.view(shape), std.view(shape)

    def _empty(self, x: torch.Tensor, memory_format: torch.memory_format) -> torch.Tensor:
        layout = memory_format if x.ndim == 4 else torch.contiguous_format
        if x.device.type == "cpu":
            return self._pool.take(x.shape, torch.float32, layout)
        return torch.empty(x.shape, dtype=torch.float32, device=x.device, memory_format=layout)

    def __call__(
        self, x: torch.Tensor, memory_format: torch.memory_format = torch.contiguous_format
    ) -> torch.Tensor:
        """Model inputs from batch `x`, laid out in `memory_format` (4-D batches)."""
        pixels = x.dtype == torch.uint8
        if self.mean is None and not pixels:
            return x
        # one float copy, then in-place passes: 7x faster on a CPU than a mixed-dtype
        # torch.mul(x, scale, out=...), and the layout change comes last, on floats
        out = self._empty(x, torch.contiguous_format).copy_(x)
        if self.mean is None:
            out.div_(255.0)
        else:
            mean, std = self._stats(x)
            out.mul_(1.0 / (std * 255.0) if pixels else 1.0 / std).sub_(mean / std)
        if memory_format != torch.contiguous_format and x.ndim == 4:
            out = self._empty(x, memory_format).copy_(out)
        return out

    def denormalize(self, x: torch.Tensor) -> torch.Tensor:
        """Map normalised model inputs back to [0, 1] pixels (for image grids)."""
        if self.mean is not None:
            mean, std = self._stats(x)
            x = x * std + mean
        return x.clamp(0.0, 1.0)


def decode_min_side(transform: Callable | None) -> int | None:
    """The shorter side a decoded image must keep for `transform`, when its first step is an
    antialiased Resize to a fixed size (a larger JPEG may then be decoded at reduced scale);
    None when the pipeline may need every source pixel (crops first, no pipeline)."""
    steps = transform.transforms if isinstance(transform, v2.Compose) else [transform]
    first = steps[0] if steps else None
    if isinstance(first, v2.Resize) and first.size and first.antialias and not first.max_size:
        return max(first.size)  # [short side] or [height, width]: either must fit
    return None


SIZED = (v2.Resize, v2.RandomResizedCrop, v2.CenterCrop, v2.RandomCrop)  # steps with a `size`


def first_size(transform: Callable | None) -> tuple[int, str] | None:
    """(the shorter side an image must keep for `transform`, the step it comes from): the
    largest side of its first Resize or crop (a Resize to [short side] or [height, width], a
    crop to its height and width); None when no such step sizes the images."""
    steps = transform.transforms if isinstance(transform, v2.Compose) else [transform]
    for step in steps:
        if isinstance(step, SIZED) and step.size:
            return max(step.size), type(step).__name__
    return None


class TimedCompose(v2.Compose):
    """`v2.Compose` that adds its time to the batch's `transform` stage and each step's to
    its class name (engine/measure/stages.py): which transform a slow pipeline spends on.
    Two clock reads a step: under a microsecond against the milliseconds of a decode."""

    def forward(self, *inputs: Any) -> Any:
        if not SUMS.enabled:  # no stage times asked of this process (engine/measure/stages.py)
            return super().forward(*inputs)
        unpack = len(inputs) > 1  # as v2.Compose: several inputs go through as a tuple
        with SUMS.timed("transform"):
            for step in self.transforms:
                start = time.perf_counter()
                outputs = step(*inputs)
                SUMS.add_step(type(step).__name__, time.perf_counter() - start)
                inputs = outputs if unpack else (outputs,)
        return outputs


class Pipelines:
    """The `transforms` config group: train and val pipelines plus the normaliser."""

    def __init__(
        self,
        train: Sequence[Callable],
        val: Sequence[Callable],
        mean: Sequence[float] | None = None,
        std: Sequence[float] | None = None,
    ) -> None:
        self.train = TimedCompose(list(train)) if train else None
        self.val = TimedCompose(list(val)) if val else None
        self.normalizer = Normalizer(mean, std)
