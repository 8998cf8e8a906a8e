"""Sweep jobs that need not run: finished before (summary.skip_completed) or the same as an
earlier job of the sweep (summary.skip_same); either way the job returns the earlier metrics.

Same: loader knobs that cannot apply are unset before the loader is built
(`LoaderSettings.applicable`: prefetch_factor, persistent_workers and the start method with
num_workers=0, pin_memory without CUDA), so `loader.num_workers=0 loader.prefetch_factor=2` and
`=4` run the same job. Each summary.csv row keeps its overrides normalised that way
(`runs_as`); a later job that runs as a finished (ok) one does not run: its directory gets
the earlier job's metrics.json marked `"same_as": N` (so scripts reading every job's
metrics.json still find one), and the summary lists it as `same as job N`. Jobs launched in
parallel that have not seen each other's rows simply run.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Annotated, Any, TypedDict

from hydra.core.hydra_config import HydraConfig
from hydra.types import RunMode
from hydra.utils import instantiate
from omegaconf import DictConfig

from engine.core.bounds import Count
from engine.core.io import write_json
from engine.core.records import Open, read_record
from engine.data.loader_settings import LoaderSettings
from engine.sweeps.table import read_rows
from engine.training.device import resolve_device

log = logging.getLogger(__name__)

SUMMARY_CSV = "summary.csv"
METRICS = "metrics.json"
SAME_AS = "same_as"  # the metrics.json key naming the job whose result a job reused
SCALARS = (bool, int, float, str, type(None))


def kept_overrides(overrides: list[str] | None) -> list[str]:
    """A job's overrides, sorted, without the keys that job directory names leave out
    (hydra.job.config.override_dirname.exclude_keys)."""
    excluded = set(HydraConfig.get().job.config.override_dirname.exclude_keys)
    return sorted(o for o in overrides or [] if o.lstrip("+~").partition("=")[0] not in excluded)


def runs_as(config: DictConfig, overrides: list[str]) -> str:
    """`overrides` with every `loader.*` value replaced by the one the loader runs with
    (LoaderSettings.applicable); as given while the loader group does not resolve (a worker
    count still null or auto, an invalid value: the job decides at run time, or fails).
    `config` must have passed validate_config: its loader node is instantiated."""
    try:
        settings: LoaderSettings = instantiate(config.loader)
        cuda = resolve_device(config.trainer.device).type == "cuda"
    except Exception:  # the job itself reports what is wrong
        return " ".join(overrides)
    if not isinstance(settings.num_workers, int):
        return " ".join(overrides)
    applied, _ = settings.applicable(cuda)
    normalised = []
    for override in overrides:
        key, _, value = override.partition("=")
        name = key.lstrip("+")
        field = name.removeprefix("loader.")
        if name.startswith("loader.") and isinstance(getattr(applied, field, None), SCALARS):
            value = str(getattr(applied, field))
        normalised.append(f"{key}={value}")
    return " ".join(normalised)


class Metrics(TypedDict, total=False):
    """A job's metrics.json: any metric (Open), and `same_as` where it reused another's."""

    same_as: Count


MAX_METRICS_BYTES = 2**24  # a job's metrics: scalars, a few hundred keys at most


def read_metrics(path: Path) -> dict[str, Any]:
    """A job's metrics.json, read as hostile input (a hand edit): a JSON object whose
    `same_as`, where there, is a job number; else one ValueError line naming the file."""
    fix = (
        "this file is the job's own record of its result; delete it and run the job again (a "
        "sweep with summary.skip_completed reruns it then)."
    )
    return read_record(path, Annotated[Metrics, Open()], MAX_METRICS_BYTES, "a metrics.json", fix)


def same_as(job_dir: Path) -> int | None:
    """The earlier job whose result this job reused (summary.skip_same), if it did."""
    metrics = job_dir / METRICS
    return read_metrics(metrics).get(SAME_AS) if metrics.exists() else None


def _finished(rows: list[dict[str, str]], column: str, value: str) -> tuple[str, Path] | None:
    """(job, metrics.json) of the first ok row whose `column` is `value` and whose metrics
    are still there; None otherwise (then the job runs)."""
    for row in rows:
        metrics = Path(row["dir"]) / METRICS
        if row["status"] == "ok" and row.get(column) == value and metrics.is_file():
            return row["job"], metrics
    return None


def previous_result(config: DictConfig) -> dict[str, Any] | None:
    """The metrics this sweep job returns without running, or None to run it: with
    summary.skip_completed its own earlier result, with summary.skip_same the result of an
    earlier job of the sweep that ran as it would."""
    hydra_cfg = HydraConfig.get()
    if hydra_cfg.mode != RunMode.MULTIRUN:
        return None
    rows = read_rows(Path(hydra_cfg.sweep.dir) / SUMMARY_CSV)
    overrides = kept_overrides(list(hydra_cfg.overrides.task))
    mine = _finished(rows, "overrides", " ".join(overrides))
    if config.summary.skip_completed and mine is not None:
        log.info(
            "summary.skip_completed: job %d already finished ok; reusing %s",
            hydra_cfg.job.num,
            mine[1],
        )
        return read_metrics(mine[1])
    key = runs_as(config, overrides)
    others = [r for r in rows if r["overrides"] != " ".join(overrides)]  # not a rerun of it
    same = _finished(others, "runs_as", key)
    if config.summary.skip_same and same is not None:
        log.info(
            "summary.skip_same: job %d runs as job %s did (%s); reusing its metrics, not running",
            hydra_cfg.job.num,
            same[0],
            key,
        )
        metrics = read_metrics(same[1]) | {SAME_AS: int(same[0])}
        write_json(Path(hydra_cfg.runtime.output_dir) / METRICS, metrics)
        return metrics
    return None
