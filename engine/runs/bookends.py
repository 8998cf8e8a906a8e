"""Where a run's files are, said at both ends: its first and last log lines name the run dir,
`outputs/latest` and `outputs/latest_<mode>` point to the newest run, and a run that failed
leaves a `FAILED` file (its one-line error) in its dir, so a folder of runs tells which
ended how without opening their logs."""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig

from engine.core.failures import one_line, root_cause
from engine.core.io import atomic_write_bytes
from engine.core.launch import launch_rank

log = logging.getLogger(__name__)

FAILED = "FAILED"  # the file a failed run leaves in its dir: the error's one line
LATEST = "latest"  # outputs/latest (any mode) and outputs/latest_<mode>


def shown(path: Path) -> str:
    """`path` relative to the working directory when below it (outputs/runs/...), else whole."""
    try:
        return str(path.resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(path)


def point_latest(log_dir: Path, run_dir: Path, mode: str) -> None:
    """Make `log_dir`/latest and latest_<mode> link to `run_dir` (relative links when it is
    below `log_dir`, so a moved outputs/ keeps them), each replaced in one rename."""
    log_dir.mkdir(parents=True, exist_ok=True)
    try:
        target = os.path.relpath(run_dir.resolve(), log_dir.resolve())
    except ValueError:  # another drive (Windows)
        target = str(run_dir.resolve())
    for name in (LATEST, f"{LATEST}_{mode}"):
        link = log_dir / name
        staged = log_dir / f".{name}.{os.getpid()}"
        staged.unlink(missing_ok=True)
        try:
            staged.symlink_to(target, target_is_directory=True)
            os.replace(staged, link)
        except OSError as err:  # no symlinks here (Windows without the privilege)
            staged.unlink(missing_ok=True)
            log.warning("could not point %s at the run: %s", link, err)
            return


def latest_run(log_dir: Path, mode: str, key: str) -> Path:
    """The run dir `log_dir`/latest_<mode> points to, for `key`=latest; one line otherwise."""
    link = log_dir / f"{LATEST}_{mode}"
    if not link.is_dir():
        raise FileNotFoundError(
            f"{key}=latest: {link} does not exist (no mode={mode} run has started with "
            f"paths.log_dir={log_dir}): run one first, or set {key} to a checkpoint file or a "
            "run dir."
        )
    return link.resolve()


@contextmanager
def bookends(cfg: DictConfig) -> Iterator[None]:
    """Around a run on rank 0: the run dir as its first and last lines, the latest links, and
    FAILED (with the one-line error) when it fails. A stop request is not a failure."""
    if launch_rank() != 0 or not HydraConfig.initialized():
        yield
        return
    run_dir = Path(HydraConfig.get().runtime.output_dir)
    log.info("run dir: %s", shown(run_dir))
    point_latest(Path(cfg.paths.log_dir), run_dir, str(cfg.mode))
    (run_dir / FAILED).unlink(missing_ok=True)  # a rerun in the same dir starts unjudged
    try:
        yield
    except Exception as err:
        atomic_write_bytes(run_dir / FAILED, (one_line(root_cause(err)) + "\n").encode())
        log.info(
            "run dir: %s (FAILED; the traceback is in its %s.log)",
            shown(run_dir),
            HydraConfig.get().job.name,
        )
        raise
    except BaseException:
        log.info("run dir: %s (stopped)", shown(run_dir))
        raise
    log.info("run dir: %s", shown(run_dir))
