"""OmegaConf resolvers used by the YAML files; registered before Hydra composes."""

from __future__ import annotations

import os
import secrets
from datetime import datetime
from typing import Any

from omegaconf import OmegaConf

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
    """Make `${launch_time:}` and `${run_id:}` return these (every rank of a torchrun job)."""
    _shared_launch.update(time=time, run_id=run_id)


def job_dir(number: int, override_dirname: str, max_len: int = 80) -> str:
    """`3` + `loader.batch_size=64,loader.num_workers=2` -> `3_batch_size=64,num_workers=2`."""
    parts = []
    for item in filter(None, override_dirname.split(",")):
        key, _, value = item.partition("=")
        parts.append(f"{key.rpartition('.')[2]}={value}")
    short = ",".join(parts).replace("/", "_")[:max_len]
    return f"{number}_{short}" if short else str(number)


def _sweep_direction(*, _root_: Any) -> str:
    from src.sweeps.direction import direction_of  # here: it imports every mode's metrics

    return direction_of(_root_)


def register_resolvers() -> None:
    """Register `${launch_time:FMT}`, `${run_id:}`, `${job_dir:...}`, `${null_if_set:A,B}`,
    `${sweep_direction:}` and `${if_rank_zero:A,B}`; safe to call again."""
    # The launch time formatted by FMT (strftime); rank 0's under torchrun, like ${now:} otherwise.
    OmegaConf.register_new_resolver(
        "launch_time",
        lambda pattern: _shared_launch.get("time", datetime.now()).strftime(pattern),
        use_cache=True,
        replace=True,
    )
    # A random tag, fixed for the life of the config, that keeps run and sweep dirs unique
    # when two runs start in the same second (rank 0's under torchrun).
    OmegaConf.register_new_resolver(
        "run_id",
        lambda: _shared_launch.get("run_id") or secrets.token_hex(3),
        use_cache=True,
        replace=True,
    )
    OmegaConf.register_new_resolver("job_dir", job_dir, replace=True)
    # null when A is set, else B: a default that gives way to an alternative key (dataset=csv's
    # demo train_csv/val_csv give way to dataset.csv)
    OmegaConf.register_new_resolver(
        "null_if_set", lambda given, default: None if given is not None else default, replace=True
    )
    # minimize or maximize: the direction that improves the metric the sweep ranks by
    OmegaConf.register_new_resolver("sweep_direction", _sweep_direction, replace=True)
    # A on global rank 0 (and in a single process), B on the other ranks of a distributed job.
    OmegaConf.register_new_resolver(
        "if_rank_zero", lambda a, b: a if launch_rank() == 0 else b, replace=True
    )
