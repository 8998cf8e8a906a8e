"""One run at a time in a run dir. Two runs started with the same fixed `hydra.run.dir` (a
requeued job whose first copy still runs, a command pasted twice), or two jobs of a multirun
whose `hydra.sweep.subdir` gives them one folder, would interleave their checkpoints, logs,
TensorBoard events and metrics.json. The run dir's `.run.lock` is held (flock) for the life of
the run; a second run is refused in one line naming the folder, the run holding it and the fix.
The kernel drops the lock when its process dies (kill -9 too), so a requeued job never waits
on a stale one.

A lock ends with its run, so it cannot tell the second job of a multirun apart from a rerun:
the file also records which multirun and job last held it, and a later job of the same
multirun is refused there too.

The lock file is also the dir's mark (engine/core/folder_mark.py): the mode that owns it and
the files a run writes (RUN_FILES). A run writes only into a new or empty folder, or one its
own mode marked: a dataset root, a checkout or a training's dir given to mode=eval is
refused before Hydra writes .hydra/ there. A sweep dir alike, by its .sweep.lock."""

from __future__ import annotations

import os
import re
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from hydra.core.hydra_config import HydraConfig
from hydra.errors import CompactHydraException
from hydra.experimental.callback import Callback
from hydra.types import RunMode
from omegaconf import DictConfig, OmegaConf

from engine.core import folder_lock, folder_mark
from engine.core.launch import launch_rank
from engine.core.records import regular_file_bytes

LOCK_NAME = folder_mark.RUN
SWEEP_LOCK_NAME = folder_mark.SWEEP
# What a run of any mode writes at the top of its run dir (its log file aside: appended to).
# In a folder no run has held, one of these is the user's own: refused, never written over.
RUN_FILES = frozenset(
    {
        ".hydra", "checkpoints", "tensorboard", "wandb", "FAILED", "config_resolved.yaml",
        "metrics.json", "metrics.csv", "history.csv", "pipeline.csv", "pipeline.png",
        "samples.csv", "bad_samples.csv", "split.csv", "fold.json", "predictions.csv",
        "per_class.csv", "hardest.csv", "confusion.csv", "confusion.png", "inspect.json",
        "inspect_train.png", "inspect_val.png", "inspect_test.png",
    }
)  # fmt: skip
# what a multirun writes at the top of its sweep dir, besides its jobs' folders (the Optuna
# sweeper: optimization_results.yaml)
SWEEP_FILES = frozenset(
    {
        "multirun.yaml", "summary.csv", "summary.md", "summary.png", "tensorboard",
        "optimization_results.yaml",
    }
)  # fmt: skip
MULTIRUN = "a multirun"  # the writer of a sweep dir's mark
HYDRAS = frozenset({".hydra"})  # what Hydra writes into a run dir before the run acts
SAVED_MODE = re.compile(r"^mode: *['\"]?(\w+)['\"]?\s*$", re.MULTILINE)  # in .hydra/config.yaml
# The files that show which mode wrote a run dir, first match wins (a training's own first)
WRITTEN_BY = (
    ("checkpoints", "train"), ("history.csv", "train"), ("predictions.csv", "predict"),
    ("inspect.json", "inspect"), ("per_class.csv", "eval"), ("hardest.csv", "eval"),
)  # fmt: skip
SAVED_CONFIG_BYTES = 2**24  # a run's .hydra/config.yaml: its whole config
# the raw hydra.sweep.subdir of a multirun must name the job, or every job gets one folder
JOB_FIELDS = ("hydra.job.num", "hydra.job.id", "hydra.job.override_dirname")


class RunDirInUse(CompactHydraException):
    """The run dir belongs to another run now: one line naming it, that run and the fix."""


class UsersFolder(RunDirInUse):
    """The run dir is not this run's to write (engine/core/folder_mark.py): someone else's
    folder, another mode's, or holding files a run would write over."""


def writer_of(mode: str) -> str:
    """The writer a run of `mode` marks its dir with: mode=eval never writes into a
    training's dir, nor a training into an evaluation's."""
    return f"mode={mode}"


def log_name(hydra: DictConfig) -> frozenset[str]:
    """The run's log file: appended by every rank, never replaced, and opened by the other
    ranks of a torchrun job as soon as rank 0 (which claims the dir)."""
    return frozenset({f"{hydra.job.name}.log"})


def _saved_writer(folder: Path) -> str:
    """The writer of a run dir whose .run.lock names none (written before marks named their
    writer, or unreadable): the mode its own files show (WRITTEN_BY: a training's
    checkpoints, an evaluation's per_class.csv, ...), else the mode in the config Hydra saved
    there, else the engine's default mode (train)."""
    shown = next((mode for name, mode in WRITTEN_BY if os.path.lexists(folder / name)), None)
    if shown is not None:
        return writer_of(shown)
    try:
        text = regular_file_bytes(folder / ".hydra" / "config.yaml", SAVED_CONFIG_BYTES, "")
    except (OSError, ValueError):
        return writer_of("train")
    found = SAVED_MODE.search(text.decode("utf-8", "replace"))
    return writer_of(found.group(1) if found else "train")


def refuse_users_files(
    folder: Path, key: str, writer: str, sweep: bool = False, ours: frozenset[str] = frozenset()
) -> None:
    """Refuse `folder` (placed by config key `key`) unless `writer` (a run's, or a multirun's
    with `sweep`) owns it or may claim it (engine/core/folder_mark.py): UsersFolder, one line
    with the fix. `ours`: what this run's Hydra wrote already (.hydra/, the log file)."""
    lock, names, run = (SWEEP_LOCK_NAME, SWEEP_FILES, "multirun") if sweep else (
        LOCK_NAME, RUN_FILES, "run"
    )  # fmt: skip
    unnamed = None if sweep else _saved_writer
    problem = folder_mark.owner_problem(folder, lock, writer, names, ours, unnamed)
    if problem is None:
        return
    mark, fix = folder / lock, f"give this {run} another {key}"
    marked = any(os.path.lexists(folder / name) for name in folder_mark.MARKS)
    if folder.is_dir() and not marked:  # no writer's folder: perhaps a run's that lost its mark
        fix += (
            f", or move those entries out (a {run}'s folder whose {lock} was deleted: touch {mark})"
        )
    elif folder.is_dir() and folder_mark.mark_problem(mark, writer) is not None:
        fix = f"remove {mark}, or {fix}"
    raise UsersFolder(f"{key}: {problem}; {fix}.")


def _lock(run_dir: str | Path) -> Path:
    return Path(os.path.abspath(run_dir)) / LOCK_NAME


def claim(
    run_dir: str | Path, mode: str = "train", sweep: str | None = None, job: int | None = None
) -> None:
    """Hold `run_dir`'s lock, its mark as a run of `mode` (engine/core/folder_mark.py), until
    `release` (or this process ends); refuse with RunDirInUse when another process holds it,
    or when another job of multirun `sweep` (its sweep dir) held it. Claiming a folder this
    process holds already does nothing."""
    lock = _lock(run_dir)
    try:
        last = folder_mark.claim(
            lock.parent, LOCK_NAME, writer_of(mode), RUN_FILES, sweep=sweep, job=job
        )
    except folder_lock.FolderBusy as busy:
        record = busy.record
        job_of = (
            f"job {record.get('job', '?')} of multirun {record['sweep']}, "
            if record.get("sweep")
            else ""
        )
        raise RunDirInUse(
            f"{lock.parent} is in use by another run ({job_of}{busy.holder}): two runs there "
            "would mix their checkpoints, logs and TensorBoard events; give this run its own "
            "hydra.run.dir, or start it again when that one has ended."
        ) from None
    if (
        last is not None
        and sweep is not None
        and last.get("sweep") == sweep
        and last.get("job") != job
    ):
        folder_lock.release(lock)
        raise RunDirInUse(
            f"{lock.parent} was the folder of job {last.get('job')} of this multirun, and job "
            f"{job} would write over its files (this multirun stops here): keep "
            "${hydra.job.num} in hydra.sweep.subdir so that every job has its own folder."
        )


def release(run_dir: str | Path) -> None:
    """Let go of `run_dir`'s lock (the record of who held it stays in the file)."""
    folder_lock.release(_lock(run_dir))


def dir_key(hydra: DictConfig, which: str) -> str:
    """The config key that places hydra.`which`.dir (run or sweep): paths.log_dir, unless
    that dir was set on its own."""
    raw = OmegaConf.to_container(hydra[which], resolve=False)["dir"]  # type: ignore[index]
    return "paths.log_dir" if "paths.log_dir" in str(raw) else f"hydra.{which}.dir"


def unwritable(key: str, folder: str | Path, err: OSError) -> str:
    """One line: the folder `key` places a run's files in cannot be written, and the fix."""
    name = Path(err.filename) if err.filename else None
    where = f": {name}" if name is not None and Path(folder) not in (name, name.parent) else ""
    return (
        f"{key}: cannot write {folder} ({err.strerror or err}{where}); make that folder "
        f"writable, or set {key} to a folder you can write."
    )


def writable(folder: str | Path, key: str) -> None:
    """Make `folder` (placed by config key `key`) and write a file in it, or exit in one line
    naming the key and the folder: before Hydra makes it, whose error names neither."""
    try:
        Path(folder).mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=folder):
            pass
    except OSError as err:
        raise SystemExit(unwritable(key, folder, err)) from None


def claim_job_dir(mode: str) -> None:
    """Claim the run dir of the Hydra job running now for a run of `mode` (rank 0 only: the
    ranks of a torchrun job share one dir), with its multirun and job number when it is a
    multirun's job; a run dir that cannot be written, or that is not this run's to write
    (refuse_users_files), exits in one line naming the key that placed it."""
    if launch_rank() != 0 or not HydraConfig.initialized():
        return
    hydra = HydraConfig.get()
    if folder_lock.held_here(_lock(hydra.runtime.output_dir)):
        return  # claimed already by this run (its log file's or .hydra's resolver, then run())
    multirun = hydra.mode == RunMode.MULTIRUN
    key = dir_key(hydra, "sweep" if multirun else "run")
    try:
        # .hydra/: Hydra wrote it for this run already when no log file claimed the dir first
        # (a user's was refused before: MultirunDirs.on_run_start)
        folder = Path(os.path.abspath(hydra.runtime.output_dir))
        refuse_users_files(folder, key, writer_of(mode), ours=HYDRAS | log_name(hydra))
        if multirun:
            claim(folder, mode, str(Path(hydra.sweep.dir).absolute()), hydra.job.num)
        else:
            claim(folder, mode)
    except OSError as err:
        raise SystemExit(unwritable(key, hydra.runtime.output_dir, err)) from None


def log_file(path: str, mode: str) -> str:
    """`${run_log:PATH,${mode}}`, the run's log file as engine/conf/hydra/job_logging names it:
    PATH, once the run dir is claimed for a run of `mode`. Hydra opens that file (and then
    writes .hydra/) before a callback or train.py can act, so this is where a second run is
    stopped before it writes; it exits (SystemExit: the one line on stderr, status 1), which
    also ends a multirun at the job that would share a folder."""
    _claimed_or_exit(mode)
    return path


def _claimed_or_exit(mode: str) -> None:
    try:
        claim_job_dir(mode)
    except RunDirInUse as err:
        raise SystemExit(str(err)) from None


def config_subdir(mode: str) -> str | None:
    """`${run_subdir:${mode}}`, hydra.output_subdir as engine/conf/engine.yaml sets it: `.hydra`
    on rank 0 once the run dir is claimed for a run of `mode` (None, no copy, on the other
    ranks). Hydra reads it right before it writes .hydra/ into the dir, also when no log file
    claimed the dir first (hydra/job_logging=disabled), so an old training's dir given to a
    multirun's eval job is refused before its .hydra/config.yaml is written over."""
    if launch_rank() != 0:
        return None
    _claimed_or_exit(mode)
    return ".hydra"


@contextmanager
def run_dir_held(mode: str) -> Iterator[None]:
    """Around a run of `mode`: its dir claimed (when a log file did not claim it already) and
    let go at the end, however the run ends."""
    claim_job_dir(mode)
    try:
        yield
    finally:
        if HydraConfig.initialized():
            release(HydraConfig.get().runtime.output_dir)


class MultirunDirs(Callback):
    """Hydra callback: one multirun at a time in a sweep dir (two would mix their
    summary.csv and overwrite multirun.yaml), and none whose hydra.sweep.subdir names no job
    (every job in one folder): both refused before the first job. The run or sweep dir must
    be writable (a read-only paths.log_dir). Hydra turns a callback's exception into a
    warning and goes on, so a refusal exits (SystemExit: one line, status 1)."""

    def on_run_start(self, config: DictConfig, **kwargs: Any) -> None:
        key = dir_key(config.hydra, "run")
        if launch_rank() == 0:  # before Hydra writes .hydra/, also with no log file to claim
            writer = writer_of(OmegaConf.select(config, "mode", default="train"))
            folder = Path(os.path.abspath(config.hydra.run.dir))
            self._refuse_users_files(folder, key, writer, ours=log_name(config.hydra))
        writable(config.hydra.run.dir, key)

    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        raw = OmegaConf.to_container(config.hydra.sweep, resolve=False)["subdir"]  # type: ignore[index]
        if not any(field in str(raw) for field in JOB_FIELDS):
            raise SystemExit(
                f"hydra.sweep.subdir={raw} gives every job of this multirun the same folder, "
                "where they would write over each other's files: keep ${hydra.job.num} in it."
            )
        sweep = Path(os.path.abspath(config.hydra.sweep.dir))
        key = dir_key(config.hydra, "sweep")
        self._refuse_users_files(sweep, key, MULTIRUN, sweep=True)
        writable(sweep, key)
        try:
            folder_mark.claim(sweep, SWEEP_LOCK_NAME, MULTIRUN, SWEEP_FILES)
        except folder_lock.FolderBusy as busy:
            raise SystemExit(
                f"{sweep} is in use by another multirun ({busy.holder}): two there would mix "
                "their summary.csv and jobs; give this one its own hydra.sweep.dir, or start it "
                "again when that one has ended."
            ) from None

    @staticmethod
    def _refuse_users_files(
        folder: Path, key: str, writer: str, sweep: bool = False, ours: frozenset[str] = frozenset()
    ) -> None:
        try:
            refuse_users_files(folder, key, writer, sweep, ours)
        except UsersFolder as err:
            raise SystemExit(str(err)) from None
        except OSError as err:
            raise SystemExit(unwritable(key, folder, err)) from None

    def on_multirun_end(self, config: DictConfig, **kwargs: Any) -> None:
        folder_lock.release(Path(os.path.abspath(config.hydra.sweep.dir)) / SWEEP_LOCK_NAME)
