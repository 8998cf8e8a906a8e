"""A tensor-file dataset made deliberately slow, to starve the loop on purpose in tests."""

from __future__ import annotations

import time
from typing import Any

import torch

from engine.data.datasets.tensor import TensorFileDataset


class SlowTensorFile(TensorFileDataset):
    """TensorFileDataset that sleeps `delay_s` seconds before every batch it returns."""

    def __init__(self, *args: Any, delay_s: float, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.delay_s = delay_s

    def __getitems__(self, indices: list[int]) -> tuple[torch.Tensor, torch.Tensor]:
        time.sleep(self.delay_s)
        return super().__getitems__(indices)
