"""A Hydra callback for tests: records how many child processes are alive after each job."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import psutil
from hydra.core.hydra_config import HydraConfig
from hydra.experimental.callback import Callback


class ChildCount(Callback):
    """Appends the live child-process count to <sweep dir>/children.txt at every job end."""

    def on_job_end(self, config: Any, job_return: Any, **kwargs: Any) -> None:
        count = len(psutil.Process().children(recursive=True))
        with open(Path(HydraConfig.get().sweep.dir) / "children.txt", "a") as f:
            f.write(f"{count}\n")
