"""Hydra callback: one summary.csv row per finished sweep job, kept ranked as it goes.

Each job's row is appended the moment the job ends (ok, failed with the error's first line,
or `same as job N` when it reused an earlier job's result: engine/sweeps/reuse.py), and
summary.md and summary.png are rebuilt from the CSV each time, so a job that crashes, or a
sweep that is killed, loses nobody else's results. With repeated measurements (mode=benchmark:
`<metric>_min` / `_max`) the `tied` column marks the jobs whose range overlaps the best job's;
in summary.csv it is filled in when the sweep ends. The summary ends with the one setting it
recommends (engine/sweeps/recommend.py). When the sweep ends, its TensorBoard entry is
written too: the HParams columns that tell its jobs apart (engine/sweeps/board.py).
"""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import Any, NamedTuple

from hydra._internal.utils import _locate  # what instantiate uses; get_object logs an ERROR
from hydra.core.hydra_config import HydraConfig
from hydra.core.utils import JobReturn, JobStatus
from hydra.experimental.callback import Callback
from hydra.types import RunMode
from omegaconf import DictConfig, OmegaConf
from torch.utils.data import IterableDataset

from engine.core.failures import innermost
from engine.core.launch import launch_rank
from engine.metric_keys import METRICS_BY_MODE, lower_is_better, metric_names, train_keys
from engine.runs.tensorboard_index import link_sweep
from engine.sweeps.board import write_sweep_board
from engine.sweeps.folds import (
    fold_columns,
    fold_groups,
    fold_markdown,
    fold_mean,
    is_group_row,
)
from engine.sweeps.plot import plot_folds, plot_sweep, swept_keys
from engine.sweeps.recommend import recommendation
from engine.sweeps.reuse import SUMMARY_CSV, kept_overrides, read_metrics, runs_as, same_as
from engine.sweeps.speed_knobs import SPEED_METRIC, speed_note, speed_only
from engine.sweeps.table import (
    BASE_COLUMNS,
    TIED,
    append_row,
    is_proportion,
    mark_tied,
    rank,
    read_rows,
    samples_key,
    spread_of,
    to_markdown,
    write_rows,
)

log = logging.getLogger(__name__)

SUMMARY_MD, SUMMARY_PNG = "summary.md", "summary.png"


def mode_metrics(config: DictConfig) -> tuple[str, ...]:
    """The metric keys of the job's mode (a training's follow its metrics group); train's for
    a mistyped mode (its job failed at the config check, and still gets its row)."""
    if config.mode not in METRICS_BY_MODE or config.mode == "train":
        return train_keys(metric_names(config.get("metrics", {})))
    return METRICS_BY_MODE[config.mode]


def folds_of(config: DictConfig) -> int | None:
    """`dataset.folds` of a k-fold job (None otherwise, or when not an int)."""
    folds = OmegaConf.select(config, "dataset.folds", default=None)
    return folds if isinstance(folds, int) and not isinstance(folds, bool) else None


def csv_columns(config: DictConfig) -> list[str]:
    """summary.csv's columns: the base ones, the metrics, `tied` with repeats, the k-fold
    group columns with dataset.folds (engine/sweeps/folds.py)."""
    tied = [TIED] if tie_columns(config) else []
    folds = fold_columns(mode_metrics(config)) if folds_of(config) is not None else []
    return [*BASE_COLUMNS, *mode_metrics(config), *tied, *folds]


def job_rows(rows: list[dict[str, str]]) -> list[dict[str, str]]:
    """The jobs' rows of summary.csv, without the k-fold groups' rows."""
    return [r for r in rows if not is_group_row(r)]


def is_stream(config: DictConfig) -> bool:
    """Whether the sweep's train set is a stream (an IterableDataset: its workers shard it)."""
    target = OmegaConf.select(config, "dataset._target_", default=None)
    try:
        kind = _locate(target) if isinstance(target, str) else None
    except ImportError:  # the jobs report it
        return False
    return isinstance(kind, type) and issubclass(kind, IterableDataset)


def rank_metric(config: DictConfig) -> str:
    """`summary.rank_by`, or the mode's headline metric when it is null: its first metric, or
    for a mode measuring one split (mode=eval: eval.split) that split's first."""
    if config.summary.rank_by:
        return config.summary.rank_by
    keys = mode_metrics(config)
    split = OmegaConf.select(config, f"{config.mode}.split")
    return next((k for k in keys if split is not None and k.startswith(f"{split}/")), keys[0])


def table_metric(config: DictConfig, knobs: list[str]) -> str:
    """The metric ranking the summary's rows: `rank_metric`, but train/samples_per_s for a
    training sweep whose jobs vary speed `knobs` only (`speed_only`), with summary.rank_by
    null (engine/sweeps/speed_knobs.py). The sweeper's objective (`headline`) stays
    `rank_metric`."""
    if config.summary.rank_by or config.mode != "train" or not knobs:
        return rank_metric(config)
    return SPEED_METRIC


def headline(config: DictConfig, metrics: dict[str, Any]) -> Any:
    """What train.py returns (a sweeper's objective): `rank_metric`'s value. With summary.rank_by
    null and that metric not measured (mode=eval of a multi-label model has no acc), the mode's
    first measured metric of the split that ranks the same way (larger first: val/map)."""
    metric = rank_metric(config)
    if metric in metrics or config.summary.rank_by:
        return metrics[metric]
    split = f"{metric.partition('/')[0]}/"
    same_way = [
        k
        for k in mode_metrics(config)
        if k in metrics and k.startswith(split) and lower_is_better(k) == lower_is_better(metric)
    ]
    if not same_way:
        raise ValueError(
            f"summary.rank_by is null and mode={config.mode} measured no {metric}: set "
            f"summary.rank_by to one of {sorted(metrics)}."
        )
    return metrics[same_way[0]]


def error_line(error: BaseException) -> str:
    """`Type: first line` of the innermost cause (Hydra wraps errors from `_target_`s)."""
    error = innermost(error)
    first = (str(error).strip().splitlines() or [""])[0]
    return f"{type(error).__name__}: {first}"


def tie_columns(config: DictConfig) -> list[str]:
    """`<metric>_min`, `<metric>_max` and `tied` when the ranking metric is measured with
    repeats (mode=benchmark's loader/samples_per_s); `tied` alone for an accuracy whose
    sample count the jobs record (val/acc beside val/samples); else none."""
    metric, keys = rank_metric(config), mode_metrics(config)
    if f"{metric}_min" in keys:
        return [f"{metric}_min", f"{metric}_max", TIED]
    return [TIED] if is_proportion(metric) and samples_key(metric) in keys else []


def _noise(rows: list[dict[str, str]], metric: str) -> str:
    """What the best row's interval of `metric` is: over repeats, or an accuracy's sampling
    error over its samples."""
    best = rows[0]
    if f"{metric}_min" in best:
        return f"the {metric} ranges [min-max over the repeats]"
    spread, samples = spread_of(best, metric), best.get(samples_key(metric), "?")
    shown = "" if spread is None else f"{spread.low:.3f}-{spread.high:.3f} "
    return (
        f"the sampling error of the best job's {metric} (95% interval {shown}over its "
        f"{float(samples):.0f} val samples)"
    )


def notes(
    rows: list[dict[str, str]], metric: str, knobs: list[str] | None = None, folds: bool = False
) -> list[str]:
    """What the ranked, tie-marked `rows` (of a sweep over speed `knobs` only: `speed_only`)
    do not say by themselves; k-fold jobs (`folds`: one setting on other val sets) are not
    compared with each other."""
    lines = [speed_note(knobs, metric)] if knobs and metric == SPEED_METRIC else []
    ok = [r for r in rows if r["status"] == "ok"]
    tied = [] if folds or len(ok) < 2 else [r["job"] for r in rows if r.get(TIED) == "yes"]
    noise = within_noise(rows, metric)
    if len(tied) > 1 and noise:
        lines.append(
            f"Within noise: jobs {', '.join(tied)} are within {_noise(rows, metric)}: tied = "
            "yes, so their gap says nothing and none is recommended by it. More val samples "
            "narrow it (4x the samples halve it), or repeat each setting with another "
            "trainer.seed."
        )
    elif len(tied) > 1:
        lines.append(
            f"The top jobs cannot be told apart: {_noise(rows, metric)} of jobs "
            f"{', '.join(tied)} overlap the best job's (tied = yes); choose among them by the "
            "other columns (fewer workers, less memory)."
        )
    elif tied and noise:
        lines.append(f"Job {tied[0]} is ahead of every other job beyond {_noise(rows, metric)}.")
    elif tied:
        lines.append(f"Job {tied[0]} is ahead of every other job in every repeat ({metric}).")
    same = [r for r in rows if r["status"].startswith("same as")]
    if same:
        lines.append(
            f"{len(same)} job{'s' if len(same) > 1 else ''} did not run: the loader settings "
            "normalise to an earlier job's (knobs that cannot apply are unset: "
            "LoaderSettings.applicable); listed as `same as job N`."
        )
    return lines


def within_noise(rows: list[dict[str, str]], metric: str) -> bool:
    """Whether the ties of `rows` come from an accuracy's sampling error (no repeats)."""
    return bool(rows) and is_proportion(metric) and f"{metric}_min" not in rows[0]


def advice(rows: list[dict[str, str]], groups: list[dict[str, str]], metric: str) -> list[str]:
    """The recommended job, unless the jobs are folds (k-fold groups: one fold is no setting),
    the best is within an accuracy's sampling error of another (a gap inside the noise), or
    the jobs differ by a seed (no setting: said so)."""
    if sum(r.get(TIED) == "yes" for r in rows) > 1 and within_noise(rows, metric):
        return []
    seeds = [key for key in swept_keys(rows) if key.rsplit(".", 1)[-1].endswith("seed")]
    if seeds:
        return [
            f"None is recommended: the jobs differ by {', '.join(seeds)}, which is no setting to "
            "pick; their spread is how much one setting's result varies from seed to seed."
        ]
    line = None if groups else recommendation(rows, metric)
    return [line] if line else []


class Standing(NamedTuple):
    """What summary.csv says now (SweepSummary._standing)."""

    written: list[dict[str, str]]  # its rows as read: the jobs', then the k-fold groups'
    unmarked: list[dict[str, str]]  # the jobs' rows with `tied` as read (copies)
    metric: str  # the table's ranking metric (table_metric)
    groups: list[dict[str, str]]  # the k-fold groups' rows, recomputed from the jobs'
    fold_lines: list[str]  # what the groups' rows do not say (fold_groups)
    rows: list[dict[str, str]]  # the jobs' rows of `written`, ranked, `tied` set
    said: list[str]  # the notes and advice under the table


class SweepSummary(Callback):
    """Writes summary.csv / summary.md / summary.png into the sweep dir (multirun only)."""

    def __init__(self) -> None:
        self._started: dict[int, float] = {}
        self._said: set[str] = set()  # the k-fold lines logged so far

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
        overrides = kept_overrides(job_return.overrides)
        text = " ".join(overrides)
        if config.summary.skip_completed and any(
            r["overrides"] == text and r["status"] != "failed"
            for r in job_rows(read_rows(sweep_dir / SUMMARY_CSV))
        ):
            return  # train.py skipped it: its earlier row stands
        metric_keys = mode_metrics(config)
        out = Path(hydra_cfg.runtime.output_dir)
        ran = job_return.status == JobStatus.COMPLETED
        row: dict[str, Any] = {
            "job": hydra_cfg.job.num,
            "job_s": f"{time.perf_counter() - self._started.pop(hydra_cfg.job.num):.2f}",
            "overrides": text,
            "dir": out,
            # only a job that ran passed validate_config: a refused config is never built
            "runs_as": runs_as(config, overrides) if ran else text,
        }
        earlier = same_as(out)
        if ran and earlier is not None:
            row |= {"status": f"same as job {earlier}", "error": ""}  # its metrics: job N's
        elif ran:
            metrics = read_metrics(out / "metrics.json")
            row |= {"status": "ok", "error": ""} | {k: metrics.get(k, "") for k in metric_keys}
        else:
            # the exception; Hydra re-raises it after the sweep
            row |= {"status": "failed", "error": error_line(job_return._return_value)}
        append_row(sweep_dir / SUMMARY_CSV, csv_columns(config), row)
        self._rewrite_reports(config, sweep_dir)

    def on_multirun_end(self, config: DictConfig, **kwargs: Any) -> None:
        sweep_dir = Path(config.hydra.sweep.dir)
        now = self._standing(config, sweep_dir)
        rows, metric, groups = now.rows, now.metric, now.groups
        if rows and tie_columns(config):  # `tied` now set in the rows read, in their order
            write_rows(sweep_dir / SUMMARY_CSV, list(now.written[0]), now.written)
        # the ranking metric's own range columns, and `tied` where the table's metric marks it
        # (a speed-knob sweep ranks by train/samples_per_s, which has no interval)
        shown = [c for c in tie_columns(config) if c != TIED or any(r.get(TIED) for r in rows)]
        columns = ["job", "status", metric, *shown, "overrides"]
        log.info(
            "Sweep summary (%s), best first; all rows in %s:\n%s%s",
            metric,
            sweep_dir / SUMMARY_MD,
            to_markdown(rows[: config.summary.top], columns),
            "".join(f"{line}\n" for line in now.said),
        )
        if groups:
            log.info(
                "k-fold cross-validation (%s: mean ± std over the folds):\n%s",
                metric,
                "\n".join(
                    f"{g['overrides'] or '(all)'}: {g['folds']} folds, {g['status']}: "
                    f"{fold_mean(g, metric) or '-'}"
                    for g in groups
                ),
            )
        board = write_sweep_board(rows, mode_metrics(config), sweep_dir, sweep_dir / SUMMARY_PNG)
        if board is not None:
            link_sweep(Path(config.paths.log_dir), config.mode, sweep_dir, board)

    def _say(self, fold_lines: list[str]) -> None:
        """Log each new k-fold line once, as it first holds (a failed sweep never reaches
        on_multirun_end); a mismatch is an error: its group has no mean."""
        for line in fold_lines:
            if line not in self._said:
                (log.error if "MISMATCH" in line else log.warning)("sweep summary: %s", line)
                self._said.add(line)

    def _standing(self, config: DictConfig, sweep_dir: Path) -> Standing:
        """summary.csv read once for what each job's end and the sweep's end report: the
        k-fold groups recomputed from its jobs (their new lines logged), the jobs ranked by
        the table's metric and tie-marked, and the notes and advice under the table."""
        written = read_rows(sweep_dir / SUMMARY_CSV)
        jobs = job_rows(written)
        knobs = speed_only(jobs, sweep_dir, is_stream(config))
        metric = table_metric(config, knobs)
        groups, fold_lines = fold_groups(jobs, mode_metrics(config), folds_of(config))
        self._say(fold_lines)
        unmarked = [dict(row) for row in jobs]  # mark_tied sets `tied` in the rows read
        rows = mark_tied(rank(jobs, metric), metric)
        said = [*notes(rows, metric, knobs, bool(groups)), *advice(rows, groups, metric)]
        return Standing(written, unmarked, metric, groups, fold_lines, rows, said)

    def _rewrite_reports(self, config: DictConfig, sweep_dir: Path) -> None:
        now = self._standing(config, sweep_dir)
        rows, metric, groups = now.rows, now.metric, now.groups
        if groups:  # the groups' rows follow the jobs', recomputed as each job ends
            write_rows(sweep_dir / SUMMARY_CSV, csv_columns(config), now.unmarked + groups)
        tied = [TIED] if tie_columns(config) and any(r.get(TIED) for r in rows) else []
        columns = [*BASE_COLUMNS[:3], *mode_metrics(config), *tied, "overrides", "error"]
        header = (
            f"# Sweep summary\n\nRanked by `{metric}`, then the jobs that did not run (same "
            "as an earlier job) or failed, in job order.\n\n"
        )
        lines = "".join(f"{line}\n\n" for line in now.said)
        folds = fold_markdown(groups, now.fold_lines, mode_metrics(config)) if groups else ""
        text = header + lines + to_markdown(rows, columns) + (f"\n{folds}" if folds else "")
        (sweep_dir / SUMMARY_MD).write_text(text)
        if groups:
            plot_folds(groups, metric, sweep_dir / SUMMARY_PNG)
        else:
            plot_sweep(rows, metric, sweep_dir / SUMMARY_PNG)
