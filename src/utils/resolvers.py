"""OmegaConf resolvers used by the YAML files; registered before Hydra composes."""

from __future__ import annotations

import os
import secrets

from omegaconf import OmegaConf


def available_cpus() -> int:
    """CPU cores this process may run on (affinity-aware, at least 1)."""
    if hasattr(os, "sched_getaffinity"):
        return max(1, len(os.sched_getaffinity(0)))
    return max(1, os.cpu_count() or 1)


def job_dir(number: int, override_dirname: str, max_len: int = 80) -> str:
    """`3` + `loader.batch_size=64,loader.num_workers=2` -> `3_batch_size=64,num_workers=2`."""
    parts = []
    for item in filter(None, override_dirname.split(",")):
        key, _, value = item.partition("=")
        parts.append(f"{key.rpartition('.')[2]}={value}")
    short = ",".join(parts).replace("/", "_")[:max_len]
    return f"{number}_{short}" if short else str(number)


def register_resolvers() -> None:
    """Register `${cpu_half:}`, `${run_id:}` and `${job_dir:...}`; safe to call again."""
    # Half the usable cores: the seed's conservative starting point for loader.num_workers.
    OmegaConf.register_new_resolver("cpu_half", lambda: max(1, available_cpus() // 2), replace=True)
    # A random tag, fixed for the life of the process, that keeps run and sweep dirs
    # unique when two runs start in the same second.
    OmegaConf.register_new_resolver(
        "run_id", lambda: secrets.token_hex(3), use_cache=True, replace=True
    )
    OmegaConf.register_new_resolver("job_dir", job_dir, replace=True)
