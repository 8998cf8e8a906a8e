"""Hydra callback: one summary.csv row per finished sweep job, kept ranked as it goes.

Each job's row is appended the moment the job ends (ok or failed, with the error's first
line), and summary.md and summary.png are rebuilt from the CSV each time, so a job that
crashes, or a sweep that is killed, loses nobody else's results.
"""

from __future__ import annotations

import json
import logging
import time
from pathlib import Path
from typing import Any

from hydra.core.hydra_config import HydraConfig
from hydra.core.utils import JobReturn, JobStatus
from hydra.experimental.callback import Callback
from hydra.types import RunMode
from omegaconf import DictConfig, OmegaConf

from src.modes import METRICS_BY_MODE
from src.sweeps.plot import plot_sweep
from src.sweeps.table import BASE_COLUMNS, append_row, rank, read_rows, to_markdown
from src.utils.resolvers import launch_rank

log = logging.getLogger(__name__)

SUMMARY_CSV, SUMMARY_MD, SUMMARY_PNG = "summary.csv", "summary.md", "summary.png"


def rank_metric(config: DictConfig) -> str:
    """`summary.rank_by`, or the mode's headline metric when it is null: its first metric, or
    for a mode measuring one split (mode=eval: eval.split) that split's first."""
    if config.summary.rank_by:
        return config.summary.rank_by
    keys = METRICS_BY_MODE[config.mode]
    split = OmegaConf.select(config, f"{config.mode}.split")
    return next((k for k in keys if split is not None and k.startswith(f"{split}/")), keys[0])


def completed_jobs(sweep_dir: Path) -> dict[str, Path]:
    """Override string -> output dir of the jobs that already finished ok in this sweep dir."""
    rows = read_rows(sweep_dir / SUMMARY_CSV)
    return {r["overrides"]: Path(r["dir"]) for r in rows if r["status"] == "ok"}


def job_overrides(overrides: list[str] | None) -> str:
    """A job's overrides as stored in the CSV: sorted, space-separated, without the keys that
    job directory names leave out (hydra.job.config.override_dirname.exclude_keys)."""
    excluded = set(HydraConfig.get().job.config.override_dirname.exclude_keys)
    kept = [o for o in overrides or [] if o.lstrip("+~").partition("=")[0] not in excluded]
    return " ".join(sorted(kept))


def error_line(error: BaseException) -> str:
    """`Type: first line` of the innermost cause (Hydra wraps errors from `_target_`s)."""
    while error.__cause__ is not None:
        error = error.__cause__
    first = (str(error).strip().splitlines() or [""])[0]
    return f"{type(error).__name__}: {first}"


class SweepSummary(Callback):
    """Writes summary.csv / summary.md / summary.png into the sweep dir (multirun only)."""

    def __init__(self) -> None:
        self._started: dict[int, float] = {}

    def on_job_start(self, config: DictConfig, **kwargs: Any) -> None:
        hydra_cfg = HydraConfig.get()
        if hydra_cfg.mode == RunMode.MULTIRUN:
            self._started[hydra_cfg.job.num] = time.perf_counter()

    def on_job_end(self, config: DictConfig, job_return: JobReturn, **kwargs: Any) -> None:
        try:
            self._record(config, job_return)
        except Exception:
            # Hydra turns callback errors into a warning; make sure the log says it loudly
            log.exception("sweep summary: recording this job failed; summary.* is incomplete")
            raise

    def _record(self, config: DictConfig, job_return: JobReturn) -> None:
        hydra_cfg = HydraConfig.get()
        if hydra_cfg.mode != RunMode.MULTIRUN or launch_rank() != 0:
            return  # one row per job: rank 0's when the job ran on several processes
        sweep_dir = Path(hydra_cfg.sweep.dir)
        overrides = job_overrides(job_return.overrides)
        if config.summary.skip_completed and overrides in completed_jobs(sweep_dir):
            return  # train.py skipped it: its earlier row stands
        metric_keys = METRICS_BY_MODE[config.mode]
        row: dict[str, Any] = {
            "job": hydra_cfg.job.num,
            "job_s": f"{time.perf_counter() - self._started.pop(hydra_cfg.job.num):.2f}",
            "overrides": overrides,
            "dir": hydra_cfg.runtime.output_dir,
        }
        if job_return.status == JobStatus.COMPLETED:
            metrics = json.loads((Path(hydra_cfg.runtime.output_dir) / "metrics.json").read_text())
            row |= {"status": "ok", "error": ""} | {k: metrics.get(k, "") for k in metric_keys}
        else:
            # the exception; Hydra re-raises it after the sweep
            row |= {"status": "failed", "error": error_line(job_return._return_value)}
        append_row(sweep_dir / SUMMARY_CSV, [*BASE_COLUMNS, *metric_keys], row)
        self._rewrite_reports(config, sweep_dir)

    def on_multirun_end(self, config: DictConfig, **kwargs: Any) -> None:
        sweep_dir = Path(config.hydra.sweep.dir)
        rows = rank(read_rows(sweep_dir / SUMMARY_CSV), rank_metric(config))
        columns = ["job", "status", rank_metric(config), "overrides"]
        log.info(
            "Sweep summary (%s), best first; all rows in %s:\n%s",
            rank_metric(config),
            sweep_dir / SUMMARY_MD,
            to_markdown(rows[: config.summary.top], columns),
        )

    def _rewrite_reports(self, config: DictConfig, sweep_dir: Path) -> None:
        metric = rank_metric(config)
        rows = rank(read_rows(sweep_dir / SUMMARY_CSV), metric)
        columns = [*BASE_COLUMNS[:3], *METRICS_BY_MODE[config.mode], "overrides", "error"]
        header = f"# Sweep summary\n\nRanked by `{metric}`; failed jobs last.\n\n"
        (sweep_dir / SUMMARY_MD).write_text(header + to_markdown(rows, columns))
        plot_sweep(rows, metric, sweep_dir / SUMMARY_PNG)


def previous_result(config: DictConfig) -> dict[str, float] | None:
    """With summary.skip_completed, the metrics of this sweep job if it already finished ok."""
    hydra_cfg = HydraConfig.get()
    if hydra_cfg.mode != RunMode.MULTIRUN or not config.summary.skip_completed:
        return None
    done = completed_jobs(Path(hydra_cfg.sweep.dir))
    earlier = done.get(job_overrides(list(hydra_cfg.overrides.task)))
    if earlier is None or not (earlier / "metrics.json").is_file():
        return None  # not finished before (or its directory is gone): run it
    log.info(
        "summary.skip_completed: job %d already finished ok; reusing %s",
        hydra_cfg.job.num,
        earlier / "metrics.json",
    )
    return json.loads((earlier / "metrics.json").read_text())
