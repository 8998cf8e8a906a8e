"""TensorBoard run names that say what each run was.

TensorBoard names a run by its folder's path under --logdir, which for this template's run
dirs starts with the same `runs/2026-...` or `multiruns/2026-...` for every run. So each run
that writes TensorBoard events also links its tensorboard/ folder into
`<paths.log_dir>/tensorboard/`, grouped by mode, and `make tensorboard` serves that folder:

    train/2026-05-01 12-00-00_ab12cd model=resnet18,lr=0.01
    train/2026-05-01 12-30-00_ef34gh sweep/3_batch_size=64,lr=0.001
    eval/2026-05-01 13-00-00_0a1b2c checkpoint=12-00-00_ab12cd,split=test
    benchmark/2026-05-01 14-00-00_9f8e7d num_workers=4

(the run dir's folder and name, then the command line's overrides, keys and paths shortened
to their last part; a sweep job is its sweep's folder and name, then its job folder; the
sweep's own entry, written when it ends, is `sweep/summary` beside its jobs). A run outside
paths.log_dir (e.g. a test's temp folder) or composed outside train.py gets no link.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

from hydra.core.hydra_config import HydraConfig
from hydra.types import RunMode
from omegaconf import DictConfig

log = logging.getLogger(__name__)

INDEX = "tensorboard"  # the folder in paths.log_dir that `make tensorboard` serves
LEFT_OUT = ("paths.", "hydra.", "hydra/", "summary.")  # overrides (and mode=): where, not what
MAX_OVERRIDES = 80  # characters of the overrides in a name


def short_overrides(overrides: list[str]) -> str:
    """`optimizer.lr=0.01 eval.checkpoint=/a/b/run` -> `lr=0.01,checkpoint=run`."""
    parts = []
    for text in overrides:
        key, _, value = text.lstrip("+~").partition("=")
        if key != "mode" and not key.startswith(LEFT_OUT):
            parts.append(f"{key.rpartition('.')[2]}={value.rstrip('/').rpartition('/')[2]}")
    return ",".join(parts)[:MAX_OVERRIDES]


def sweep_folder(mode: str, sweep_dir: Path) -> str:
    """The index folder of the sweep in `sweep_dir`, holding a link per job."""
    return f"{mode}/{sweep_dir.parent.name} {sweep_dir.name} sweep"


def run_name(mode: str, run_dir: Path, sweep_dir: Path | None, overrides: list[str]) -> str:
    """The name of the run in `run_dir` (a job of the sweep in `sweep_dir`, if any)."""
    if sweep_dir is not None:
        return f"{sweep_folder(mode, sweep_dir)}/{run_dir.name}"
    short = short_overrides(overrides)
    return f"{mode}/{run_dir.parent.name} {run_dir.name}" + (f" {short}" if short else "")


def link_run(cfg: DictConfig, board_dir: Path) -> Path | None:
    """Link `board_dir` (this run's tensorboard/ folder) into the index under the run's
    name; returns the link, or None where there is none (see the module docstring)."""
    if not HydraConfig.initialized():
        return None
    hydra_cfg = HydraConfig.get()
    resolved = _resolved(Path(cfg.paths.log_dir), Path(cfg.paths.output_dir))
    if resolved is None:
        return None
    log_dir, run_dir = resolved
    if log_dir not in run_dir.parents:
        return None
    sweep = Path(hydra_cfg.sweep.dir).resolve() if hydra_cfg.mode == RunMode.MULTIRUN else None
    return _link(
        log_dir / INDEX / run_name(cfg.mode, run_dir, sweep, list(hydra_cfg.overrides.task)),
        board_dir,
    )


def link_sweep(log_dir: Path, mode: str, sweep_dir: Path, board_dir: Path) -> Path | None:
    """Link the sweep's own `board_dir` into the index beside its jobs, as `sweep/summary`
    (None outside `log_dir`, or without symlinks)."""
    resolved = _resolved(log_dir, sweep_dir)
    if resolved is None:
        return None
    log_dir, sweep_dir = resolved
    if log_dir not in sweep_dir.parents:
        return None
    return _link(log_dir / INDEX / sweep_folder(mode, sweep_dir) / "summary", board_dir)


def _resolved(log_dir: Path, run_dir: Path) -> tuple[Path, Path] | None:
    """Both paths resolved, or None where one cannot be (a symlink loop: RuntimeError before
    Python 3.13, OSError after): no index link then, as where the file system has no symlinks;
    the run dir still has it all (the latest links warn about paths.log_dir)."""
    try:
        return log_dir.resolve(), run_dir.resolve()
    except (OSError, RuntimeError) as err:
        log.info("no TensorBoard index link for this run (paths.log_dir=%s: %s)", log_dir, err)
        return None


def _link(link: Path, board_dir: Path) -> Path | None:
    try:
        link.parent.mkdir(parents=True, exist_ok=True)
        if not link.is_symlink():
            link.symlink_to(os.path.relpath(board_dir.resolve(), link.parent), True)
    except OSError as err:  # e.g. a file system without symlinks: the run dir still has it all
        log.info("no TensorBoard index link for this run (%s)", err)
        return None
    return link
