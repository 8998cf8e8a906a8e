"""How many CPU cores this process may use, and the default share of them for loader workers."""

from __future__ import annotations

import os


def available_cpus() -> int:
    """CPU cores this process may run on (affinity-aware, at least 1)."""
    if hasattr(os, "sched_getaffinity"):
        return max(1, len(os.sched_getaffinity(0)))
    return max(1, os.cpu_count() or 1)


def half_the_cores() -> int:
    """Half the usable cores, shared among the ranks torchrun started on this node (at least 1):
    a conservative start for loader workers that leaves the other half to the main process.
    A SLURM task already sees only its own cores (cpus_per_task), so nothing is divided there."""
    ranks_here = int(os.environ.get("LOCAL_WORLD_SIZE", "1"))
    share = ranks_here if "TORCHELASTIC_RUN_ID" in os.environ else 1
    return max(1, available_cpus() // 2 // share)
