"""Where a launch stands before any process group exists: its rank, and under torchrun rank
0's launch time and run id, shared by every rank (one run dir per job); job folder names."""

from __future__ import annotations

import hashlib
import os
import re
import secrets
from datetime import datetime
from typing import Any

# Under torchrun: rank 0's launch time and run id, shared by every rank (one run dir per job)
_shared_launch: dict[str, Any] = {}


def launch_rank() -> int:
    """This process's global rank as its launcher says, before any process group exists:
    torchrun's RANK, a submitit task's global rank, else 0."""
    if "RANK" in os.environ:
        return int(os.environ["RANK"])
    if "SUBMITIT_EXECUTOR" in os.environ:  # a job started by hydra-submitit-launcher
        import submitit

        return submitit.JobEnvironment().global_rank
    return 0


def share_launch(time: datetime, run_id: str) -> None:
    """Make `launch_time()` and `launch_id()` return these (every rank of a torchrun job)."""
    _shared_launch.update(time=time, run_id=run_id)


def launch_time() -> datetime:
    """When this launch started: now, or rank 0's time under torchrun."""
    return _shared_launch.get("time", datetime.now())


def launch_id() -> str:
    """A random tag that keeps runs started in the same second apart (rank 0's under torchrun)."""
    return _shared_launch.get("run_id") or secrets.token_hex(3)


# a comma between overrides, not inside a list or dict value ([8,16,32], {a:1,b:2}); one level
_TOP_LEVEL_COMMA = re.compile(r",(?![^\[{]*[\]}])")


def job_dir(number: int, override_dirname: str, max_len: int = 80) -> str:
    """`3` + `loader.batch_size=64,loader.num_workers=2` -> `3_batch_size=64,num_workers=2`;
    a list value keeps its commas (`model.widths=[8,16,32]` -> `widths=[8,16,32]`). A name
    longer than `max_len` is cut and ends in a hash of all the overrides, so jobs whose
    overrides differ past the cut (two sweeps sharing a dir) never share a folder."""
    parts = []
    for item in filter(None, _TOP_LEVEL_COMMA.split(override_dirname)):
        key, _, value = item.partition("=")
        parts.append(f"{key.rpartition('.')[2]}={value}")
    short = ",".join(parts).replace("/", "_")
    if len(short) > max_len:
        digest = hashlib.sha256(override_dirname.encode()).hexdigest()[:8]
        short = f"{short[: max_len - 9]}~{digest}"
    return f"{number}_{short}" if short else str(number)
