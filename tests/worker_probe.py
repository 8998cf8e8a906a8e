"""A Hydra callback for tests: records how many child processes each job left alive (those
that were not there when the sweep started, such as multiprocessing's resource tracker)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import psutil
from hydra.core.hydra_config import HydraConfig
from hydra.experimental.callback import Callback


def _children() -> set[int]:
    return {child.pid for child in psutil.Process().children(recursive=True)}


class ChildCount(Callback):
    """Appends the count of new live child processes to <sweep dir>/children.txt at every
    job end."""

    def __init__(self) -> None:
        self.before: set[int] = set()

    def on_multirun_start(self, config: Any, **kwargs: Any) -> None:
        self.before = _children()

    def on_job_end(self, config: Any, job_return: Any, **kwargs: Any) -> None:
        count = len(_children() - self.before)
        with open(Path(HydraConfig.get().sweep.dir) / "children.txt", "a") as f:
            f.write(f"{count}\n")
