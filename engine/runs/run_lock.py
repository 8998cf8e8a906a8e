"""One run at a time in a run dir. Two runs started with the same fixed `hydra.run.dir` (a
requeued job whose first copy still runs, a command pasted twice), or two jobs of a multirun
whose `hydra.sweep.subdir` gives them one folder, would interleave their checkpoints, logs,
TensorBoard events and metrics.json. The run dir's `.run.lock` is held (flock) for the life of
the run; a second run is refused in one line naming the folder, the run holding it and the fix.
The kernel drops the lock when its process dies (kill -9 too), so a requeued job never waits
on a stale one.

A lock ends with its run, so it cannot tell the second job of a multirun apart from a rerun:
the file also records which multirun and job last held it, and a later job of the same
multirun is refused there too."""

from __future__ import annotations

import fcntl
import json
import logging
import os
import socket
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path
from typing import Any

from hydra.core.hydra_config import HydraConfig
from hydra.errors import CompactHydraException
from hydra.experimental.callback import Callback
from hydra.types import RunMode
from omegaconf import DictConfig, OmegaConf

from engine.core.launch import launch_rank

log = logging.getLogger(__name__)

LOCK_NAME = ".run.lock"
_held: dict[Path, int] = {}  # run dir -> the descriptor whose flock this process holds
# the raw hydra.sweep.subdir of a multirun must name the job, or every job gets one folder
JOB_FIELDS = ("hydra.job.num", "hydra.job.id", "hydra.job.override_dirname")


def _close_in_child() -> None:
    """A forked child (a loader worker) closes its copies of the lock descriptors: they would
    keep the lock alive after a kill -9 of the run until the orphan noticed (seconds), and a
    requeued job would be refused meanwhile. Closing a copy leaves the parent's lock held."""
    for fd in _held.values():
        os.close(fd)
    _held.clear()


os.register_at_fork(after_in_child=_close_in_child)


class RunDirInUse(CompactHydraException):
    """The run dir belongs to another run now: one line naming it, that run and the fix."""


def _record(fd: int) -> dict[str, Any]:
    """Who last held the lock file `fd` (empty when it is new or unreadable)."""
    os.lseek(fd, 0, os.SEEK_SET)
    try:
        record = json.loads(os.read(fd, 65536) or b"{}")
    except ValueError:
        return {}
    return record if isinstance(record, dict) else {}


def _who(record: dict[str, Any]) -> str:
    job = f"job {record['job']} of multirun {record['sweep']}, " if record.get("sweep") else ""
    return (
        f"{job}pid {record.get('pid', '?')} on {record.get('host', '?')}, started "
        f"{record.get('started', '?')}"
    )


def claim(run_dir: str | Path, sweep: str | None = None, job: int | None = None) -> None:
    """Hold `run_dir`'s lock until `release` (or this process ends); refuse with RunDirInUse
    when another process holds it, or when another job of multirun `sweep` (its sweep dir)
    held it. Claiming a folder this process holds already does nothing."""
    folder = Path(os.path.abspath(run_dir))
    if folder in _held:
        return
    folder.mkdir(parents=True, exist_ok=True)
    fd = os.open(folder / LOCK_NAME, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o666)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        holder = _who(_record(fd))
        os.close(fd)
        raise RunDirInUse(
            f"{folder} is in use by another run ({holder}): two runs there would mix their "
            "checkpoints, logs and TensorBoard events; give this run its own hydra.run.dir, "
            "or start it again when that one has ended."
        ) from None
    except OSError as err:  # a file system without flock (some network mounts)
        os.close(fd)
        log.warning(
            "%s: cannot lock it (%s), so a second run started there at the same time would not "
            "be stopped: give every run its own hydra.run.dir",
            folder,
            err.strerror,
        )
        return
    last = _record(fd)
    if sweep is not None and last.get("sweep") == sweep and last.get("job") != job:
        os.close(fd)
        raise RunDirInUse(
            f"{folder} was the folder of job {last.get('job')} of this multirun, and job {job} "
            "would write over its files (this multirun stops here): keep ${hydra.job.num} in "
            "hydra.sweep.subdir so that every job has its own folder."
        )
    record = {
        "pid": os.getpid(),
        "host": socket.gethostname(),
        "started": datetime.now().isoformat(timespec="seconds"),
        "command": " ".join(sys.argv)[:500],
        "sweep": sweep,
        "job": job,
    }
    os.ftruncate(fd, 0)
    os.pwrite(fd, (json.dumps(record) + "\n").encode(), 0)
    _held[folder] = fd


def release(run_dir: str | Path) -> None:
    """Let go of `run_dir`'s lock (the record of who held it stays in the file)."""
    fd = _held.pop(Path(os.path.abspath(run_dir)), None)
    if fd is not None:
        os.close(fd)


def claim_job_dir() -> None:
    """Claim the run dir of the Hydra job running now (rank 0 only: the ranks of a torchrun
    job share one dir), with its multirun and job number when it is a multirun's job."""
    if launch_rank() != 0 or not HydraConfig.initialized():
        return
    hydra = HydraConfig.get()
    if hydra.mode == RunMode.MULTIRUN:
        claim(hydra.runtime.output_dir, str(Path(hydra.sweep.dir).absolute()), hydra.job.num)
    else:
        claim(hydra.runtime.output_dir)


def log_file(path: str) -> str:
    """`${run_log:PATH}`, the run's log file as conf/hydra/job_logging names it: PATH, once
    the run dir is claimed. Hydra opens that file (and then writes .hydra/) before a
    callback or train.py can act, so this is where a second run is stopped before it
    writes; it exits (SystemExit: the one line on stderr, status 1), which also ends a
    multirun at the job that would share a folder."""
    try:
        claim_job_dir()
    except RunDirInUse as err:
        raise SystemExit(str(err)) from None
    return path


@contextmanager
def run_dir_held() -> Iterator[None]:
    """Around a run: its dir claimed (when a log file did not claim it already) and let go
    at the end, however the run ends."""
    claim_job_dir()
    try:
        yield
    finally:
        if HydraConfig.initialized():
            release(HydraConfig.get().runtime.output_dir)


class SharedSweepDirs(Callback):
    """Hydra callback: a multirun whose hydra.sweep.subdir names no job field (every job in
    one folder) is refused before its first job. Hydra turns a callback's exception into a
    warning and goes on, so the refusal exits (SystemExit: one line, status 1)."""

    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        raw = OmegaConf.to_container(config.hydra.sweep, resolve=False)["subdir"]  # type: ignore[index]
        if not any(field in str(raw) for field in JOB_FIELDS):
            raise SystemExit(
                f"hydra.sweep.subdir={raw} gives every job of this multirun the same folder, "
                "where they would write over each other's files: keep ${hydra.job.num} in it."
            )
