"""An ImageFolder dataset that misbehaves on purpose inside loader workers (fault injection):
a test names it as dataset._target_ (engine_dev.faulty.FaultyImageFolder) and adds it to
allowed_targets_extra."""

from __future__ import annotations

import os
import time
from typing import Any

from torch.utils.data import get_worker_info

from engine.data.datasets.imagefolder import ImageFolderDataset


class FaultyImageFolder(ImageFolderDataset):
    """`fault`: hang (sleep `delay_s`, an hour by default) or die (exit the worker) at sample
    `at_index`, or slow (sleep `delay_s` per sample, to leave time for a kill). Faults fire in
    workers only."""

    def __init__(
        self, *args: Any, fault: str, at_index: int = -1, delay_s: float = 0.0, **kwargs: Any
    ) -> None:
        super().__init__(*args, **kwargs)
        self.fault, self.at_index, self.delay_s = fault, at_index, delay_s

    def __getitem__(self, index: int) -> Any:
        if get_worker_info() is not None:
            if self.fault == "slow":
                time.sleep(self.delay_s)
            elif index == self.at_index and self.fault == "hang":
                time.sleep(self.delay_s or 3600)
            elif index == self.at_index and self.fault == "die":
                os._exit(3)
        return super().__getitem__(index)
