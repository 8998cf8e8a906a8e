"""A tensor-file dataset made deliberately slow, to starve the loop on purpose in tests."""

from __future__ import annotations

import time
from typing import Any

import torch
from torch.utils.data import get_worker_info

from engine.data.datasets.tensor import TensorFileDataset


class SlowTensorFile(TensorFileDataset):
    """TensorFileDataset that sleeps `delay_s` seconds before every batch it returns, or with
    `only_in_main` only in the main process (loader workers deliver at once)."""

    def __init__(
        self, *args: Any, delay_s: float, only_in_main: bool = False, **kwargs: Any
    ) -> None:
        super().__init__(*args, **kwargs)
        self.delay_s, self.only_in_main = delay_s, only_in_main

    def __getitems__(self, indices: list[int]) -> tuple[torch.Tensor, torch.Tensor]:
        if not (self.only_in_main and get_worker_info() is not None):
            time.sleep(self.delay_s)
        return super().__getitems__(indices)
