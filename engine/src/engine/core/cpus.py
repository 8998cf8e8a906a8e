"""How many CPU cores this process may use, and the default shares of them: loader workers and
the main process's torch threads."""

from __future__ import annotations

import math
import os
from pathlib import Path

CGROUP = Path("/sys/fs/cgroup")  # where Linux mounts the control groups (v2 unified, or v1)


def cgroup_cpu_limit(root: Path = CGROUP) -> float | None:
    """The CPU quota of this container in cores (cgroup v2 `cpu.max`, v1 `cpu.cfs_quota_us`
    over `cpu.cfs_period_us`); None when unlimited or not on Linux. Docker's `--cpus=2` and
    Kubernetes' CPU limits set it without changing the affinity mask."""
    v2, v1 = root / "cpu.max", root / "cpu" / "cpu.cfs_quota_us"
    try:
        if v2.is_file():
            quota, period = v2.read_text().split()[:2]
        elif v1.is_file():
            quota, period = v1.read_text().strip(), (v1.parent / "cpu.cfs_period_us").read_text()
        else:
            return None
    except (OSError, ValueError):  # unreadable or malformed: no limit we can know of
        return None
    if quota.strip() in ("max", "-1") or int(period) <= 0:
        return None
    return int(quota) / int(period)


def available_cpus() -> int:
    """CPU cores this process may run on: the affinity mask, capped by a cgroup quota (rounded
    up, at least 1)."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    limit = cgroup_cpu_limit()
    if limit is not None:
        cores = min(cores or 1, math.ceil(limit))
    return max(1, cores or 1)


def cores_per_rank() -> int:
    """The usable cores shared among the ranks torchrun started on this node (at least 1). A
    SLURM task already sees only its own cores (cpus_per_task), so nothing is divided there."""
    ranks_here = int(os.environ.get("LOCAL_WORLD_SIZE", "1"))
    share = ranks_here if "TORCHELASTIC_RUN_ID" in os.environ else 1
    return max(1, available_cpus() // share)


def half_the_cores() -> int:
    """Half of this rank's cores (at least 1): a conservative start for loader workers that
    leaves the other half to the main process."""
    return max(1, cores_per_rank() // 2)


def main_threads(workers: int) -> int:
    """torch's intra-op threads for the main process: this rank's cores less one per loader
    worker (each worker runs one thread), at least 1. torch's default, every core, on top of
    the workers asks for more cores than there are: beside a second busy process that ran 1.8x
    slower on 2 cores (on a quiet machine, where the demo's worker idles, 1.25x faster;
    BENCHMARKS.md, `make bench-threads`)."""
    return max(1, cores_per_rank() - workers)
