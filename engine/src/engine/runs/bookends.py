"""Where a run's files are, said at both ends: its first and last log lines name the run dir,
`outputs/latest` and `outputs/latest_<mode>` point to the newest run, and a run that failed
leaves a `FAILED` file (its one-line error) in its dir, so a folder of runs tells which
ended how without opening their logs."""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

from hydra.core.hydra_config import HydraConfig
from hydra.types import RunMode
from omegaconf import DictConfig

from engine.core.failures import one_line, root_cause
from engine.core.io import atomic_write_bytes
from engine.core.launch import launch_rank
from engine.core.text import shown

log = logging.getLogger(__name__)

FAILED = "FAILED"  # the file a failed run leaves in its dir: the error's one line
LATEST = "latest"  # outputs/latest (any mode) and outputs/latest_<mode>
SWEEP = "sweep"  # outputs/latest_sweep: the sweep dir of the newest sweep's jobs


def relative(path: Path) -> str:
    """`path` relative to the working directory when below it (outputs/runs/...), else whole,
    kept to one line (`engine.core.text.shown`)."""
    try:
        return shown(path.resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return shown(path)


def _link(log_dir: Path, name: str, target: str) -> None:
    """`log_dir`/`name` -> `target`, replaced in one rename; a file or folder of that name
    that is no link is the user's: kept, with a warning."""
    link, staged = log_dir / name, log_dir / f".{name}.{os.getpid()}"
    if link.exists() and not link.is_symlink():
        log.warning(
            "%s is a %s, not a link: kept, and no %s link points at this run; move it away "
            "to have one.",
            link,
            "folder" if link.is_dir() else "file",
            name,
        )
        return
    try:
        staged.unlink(missing_ok=True)
        staged.symlink_to(target, target_is_directory=True)
        os.replace(staged, link)
    except OSError as err:  # a read-only log_dir; no symlinks here (Windows, no privilege)
        with suppress(OSError):  # our own temp link, if it was made: the warning says why
            staged.unlink(missing_ok=True)
        log.warning(
            "could not point %s at %s (%s): make paths.log_dir writable to have the link",
            link,
            target,
            err.strerror or err,
        )


def point_latest(log_dir: Path, run_dir: Path, mode: str, both: bool = True) -> str | None:
    """Make `log_dir`/latest (unless not `both`) and latest_<mode> link to `run_dir` (relative
    links when it is below `log_dir`, so a moved outputs/ keeps them); returns where
    latest_<mode> pointed before (None: nowhere), for `restore_latest`. A log_dir that cannot
    be made gets no links (a warning naming the key): they point at runs, not the run's files."""
    try:
        log_dir.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        dangling = log_dir.is_symlink() and not log_dir.exists()  # mkdir says "File exists"
        log.warning(
            "paths.log_dir=%s cannot be made (%s): no %s links point at this run; make its "
            "parent writable, or set paths.log_dir to a folder you can write.",
            log_dir,
            "a link to nothing, or in a loop" if dangling else err.strerror or err,
            LATEST,
        )
        return None
    try:
        target = os.path.relpath(run_dir.resolve(), log_dir.resolve())
    except ValueError:  # another drive (Windows)
        target = str(run_dir.resolve())
    mine = log_dir / f"{LATEST}_{mode}"
    before = os.readlink(mine) if mine.is_symlink() else None
    for name in (LATEST, mine.name) if both else (mine.name,):
        _link(log_dir, name, target)
    return before


def restore_latest(log_dir: Path, mode: str, before: str | None, run_dir: Path) -> None:
    """A failed run `run_dir` gives latest_<mode> back to the run before it (`eval.checkpoint=
    latest` means the newest training that did not fail); outputs/latest stays on it, to read
    why. A newer run that took the link meanwhile keeps it."""
    link = log_dir / f"{LATEST}_{mode}"
    if not link.is_symlink() or link.resolve() != run_dir.resolve():
        return
    if before is None:
        (log_dir / f"{LATEST}_{mode}").unlink(missing_ok=True)
    else:
        _link(log_dir, f"{LATEST}_{mode}", before)


def latest_run(log_dir: Path, mode: str, key: str) -> Path:
    """The run dir `log_dir`/latest_<mode> points to, for `key`=latest; one line otherwise."""
    link = log_dir / f"{LATEST}_{mode}"
    if os.path.lexists(link) and not link.is_symlink():
        raise FileNotFoundError(
            f"{key}=latest: {link} is a {'folder' if link.is_dir() else 'file'} of yours, not "
            "the link a run leaves: move it away (the next run links it), or set "
            f"{key} to a checkpoint file or a run dir."
        )
    if not link.is_dir():
        sweep = log_dir / f"{LATEST}_{SWEEP}"
        jobs = (
            f"; a sweep's jobs leave it alone: name one, {key}={sweep}/<job dir>"
            if sweep.is_dir()
            else ""
        )
        raise FileNotFoundError(
            f"{key}=latest: {link} does not exist (no mode={mode} run has started on its own "
            f"with paths.log_dir={log_dir}{jobs}): run one first, or set {key} to a checkpoint "
            "file or a run dir."
        )
    return link.resolve()


class Bookends:
    """What `bookends` yields: `checked()` once the config passed its checks points the latest
    links at the run (a mistyped mode=trian makes no latest_trian)."""

    def __init__(self, cfg: DictConfig, run_dir: Path | None) -> None:
        self.cfg, self.run_dir = cfg, run_dir
        self.before: str | None = None
        self.pointed = False

    def checked(self) -> None:
        """The config passed its checks: outputs/latest and latest_<mode> point at this run;
        a job of a sweep points outputs/latest_sweep at its sweep dir instead, so that
        `eval.checkpoint=latest` keeps meaning the newest training started on its own (after
        a sweep of 2-epoch jobs it evaluated the sweep's last job, not the training before)."""
        if self.run_dir is None:
            return
        log_dir, mode = Path(self.cfg.paths.log_dir), str(self.cfg.mode)
        if HydraConfig.get().mode == RunMode.MULTIRUN:
            point_latest(log_dir, Path(HydraConfig.get().sweep.dir), SWEEP, both=False)
            return
        self.before, self.pointed = point_latest(log_dir, self.run_dir, mode), True

    def failed(self) -> None:
        """The run failed: latest_<mode> goes back to the run before it (`restore_latest`)."""
        if self.pointed and self.run_dir is not None:
            log_dir, mode = Path(self.cfg.paths.log_dir), str(self.cfg.mode)
            restore_latest(log_dir, mode, self.before, self.run_dir)


@contextmanager
def bookends(cfg: DictConfig) -> Iterator[Bookends]:
    """Around a run on rank 0: the run dir as its first and last lines, the latest links
    (`Bookends.checked`), and FAILED (with the one-line error) when it fails. A stop request
    is not a failure."""
    if launch_rank() != 0 or not HydraConfig.initialized():
        yield Bookends(cfg, None)
        return
    run_dir = Path(HydraConfig.get().runtime.output_dir)
    log.info("run dir: %s", relative(run_dir))
    (run_dir / FAILED).unlink(missing_ok=True)  # a rerun in the same dir starts unjudged
    ends = Bookends(cfg, run_dir)
    try:
        yield ends
    except Exception as err:
        ends.failed()
        atomic_write_bytes(run_dir / FAILED, (one_line(root_cause(err)) + "\n").encode())
        log.info(
            "run dir: %s (FAILED; the traceback is in its %s.log)",
            relative(run_dir),
            HydraConfig.get().job.name,
        )
        raise
    except BaseException:
        log.info("run dir: %s (stopped)", relative(run_dir))
        raise
    log.info("run dir: %s", relative(run_dir))
