"""A PNG of a sweep: the ranking metric against num_workers, one line per batch size; with
repeated measurements, each point's range [min-max] as an error bar; for k-fold groups, each
group's mean ± std."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path
from typing import TYPE_CHECKING

from engine.measure.stages import COLOURS
from engine.metric_keys import MAIN_STAGES, PIPELINE_KEYS, WORKER_STAGES, lower_is_better
from engine.sweeps.table import spread_of

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

X_KEY, SERIES_KEY = "loader.num_workers", "loader.batch_size"


def parse_overrides(text: str) -> dict[str, str]:
    """`"a.b=1 c=x"` -> {"a.b": "1", "c": "x"}."""
    return dict(item.split("=", 1) for item in text.split() if "=" in item)


def settings(text: str) -> dict[str, str]:
    """`parse_overrides` keyed by the setting (`++a.b=1` -> {"a.b": "1"}): a `+`, `++` or `~`
    prefix says how Hydra applies an override, not which key it sets."""
    return {key.lstrip("+~"): value for key, value in parse_overrides(text).items()}


def swept_keys(rows: list[dict[str, str]]) -> list[str]:
    """The override keys whose value differs between the sweep's jobs (a key some jobs lack
    differs too), in first-seen order."""
    parsed = [settings(row["overrides"]) for row in rows]
    keys = dict.fromkeys(key for overrides in parsed for key in overrides)
    return [key for key in keys if len({overrides.get(key) for overrides in parsed}) > 1]


def _error_bars(rows: list[dict[str, str]], metric: str) -> list[list[float]] | None:
    """Distances from each row's median down to its min and up to its max, when all have them."""
    spreads = [s for r in rows if (s := spread_of(r, metric)) is not None]
    if not rows or len(spreads) < len(rows):
        return None
    return [[s.median - s.low for s in spreads], [s.high - s.median for s in spreads]]


def title_counts(rows: list[dict[str, str]], ok: list[dict[str, str]]) -> str:
    """`4 jobs finished, 2 same as an earlier job, 1 failed`: what became of the jobs not
    plotted, each kind counted apart (a count of 0 is left out)."""
    same = sum(r["status"].startswith("same as") for r in rows)
    failed = sum(r["status"] == "failed" for r in rows)
    parts = [
        (len(ok), "jobs finished"),
        (same, "same as an earlier job"),
        (failed, "failed"),
        (len(rows) - len(ok) - same - failed, "without a value to plot"),
    ]
    return ", ".join(f"{n} {what}" for i, (n, what) in enumerate(parts) if n or i == 0)


def _figure() -> tuple[Figure, Axes]:
    """A 700 x 450 px figure drawn by Agg, never a window (no pyplot). matplotlib is imported
    here, not with the module: it costs 0.2 s of every run's start, and only sweeps draw."""
    figure = _blank_figure((7, 4.5))
    return figure, figure.subplots()


def _blank_figure(inches: tuple[float, float], layout: str | None = None) -> Figure:
    """An empty Agg figure of `inches` at 100 dpi (see `_figure`)."""
    from matplotlib.figure import Figure

    return Figure(figsize=inches, dpi=100, layout=layout)


def _stage_bars(ax: Axes, rows: list[dict[str, str]], stages: tuple[str, ...], unit: str) -> None:
    """One stacked bar per job: its pipeline/<stage>_ms of each of `stages`."""
    keys = swept_keys(rows)
    labels = [
        f"#{r['job']} "
        + " ".join(f"{k.rsplit('.', 1)[-1]}={settings(r['overrides']).get(k, '')}" for k in keys)
        for r in rows
    ]
    left = [0.0] * len(rows)
    for stage in stages:
        widths = [float(r.get(f"pipeline/{stage}_ms") or 0) for r in rows]
        ax.barh(labels, widths, left=left, label=stage, color=COLOURS[stage])
        left = [a + b for a, b in zip(left, widths, strict=True)]
    ax.set_xlabel(unit)
    ax.legend(  # below the axis: never over a bar
        loc="upper center", bbox_to_anchor=(0.5, -0.2), ncols=len(stages), fontsize="small"
    )
    ax.grid(alpha=0.3)


def plot_stages(rows: list[dict[str, str]], figure: Figure) -> None:
    """Where each job's time went, beside the metric: the main process's ms per batch
    (wait, h2d, step) and the workers' ms per sample (read, decode, transform, collate)."""
    main, workers = figure.subplots(1, 2, sharey=True)
    _stage_bars(main, rows, MAIN_STAGES, "main process: ms per batch")
    _stage_bars(workers, rows, WORKER_STAGES, "loader workers: ms per sample")
    main.set_title(f"where the time went ({', '.join(swept_keys(rows)) or 'per job'})")


def plot_sweep(rows: list[dict[str, str]], metric: str, path: Path) -> None:
    """Lines of `metric` over loader.num_workers when swept, else one bar per job; ranges
    [min-max] as error bars where the rows have them. With the jobs' pipeline/<stage>_ms
    (trainer.pipeline_timing), a stacked bar per job of where the time went, below."""
    ok = [r for r in rows if r["status"] == "ok" and r.get(metric)]
    timed = [r for r in ok if r.get(PIPELINE_KEYS[0])]
    if timed:
        fig = _blank_figure((10, 8), layout="constrained")
        top, bottom = fig.subfigures(2, 1)
        ax = top.subplots()
        plot_stages(timed, bottom)
    else:
        fig, ax = _figure()
    swept = [settings(r["overrides"]) for r in ok]
    if ok and all(X_KEY in s for s in swept):
        # numbers in numeric order, anything else (e.g. "auto") after them, as categories
        xs = sorted(
            {s[X_KEY] for s in swept},
            key=lambda v: (not v.isdigit(), int(v) if v.isdigit() else 0, v),
        )
        lines: dict[str, dict[str, list[dict[str, str]]]] = defaultdict(lambda: defaultdict(list))
        for row, given in zip(ok, swept, strict=True):
            series = f"batch_size={given[SERIES_KEY]}" if SERIES_KEY in given else "all"
            lines[series][given[X_KEY]].append(row)
        best = min if lower_is_better(metric) else max
        for series, points in sorted(lines.items()):
            present = [x for x in xs if x in points]
            # several jobs share a point when other keys were swept too: plot their best
            shown = [best(points[x], key=lambda r: float(r[metric])) for x in present]
            ax.errorbar(
                [xs.index(x) for x in present],
                [float(r[metric]) for r in shown],
                yerr=_error_bars(shown, metric),
                marker="o",
                capsize=4,
                label=series,
            )
        ax.set_xticks(range(len(xs)), xs)
        ax.set_xlabel(X_KEY)
        ax.set_ylabel(f"{metric} (best job per point)")
        ax.legend()
    else:
        ax.barh(
            [f"#{r['job']}" for r in ok],
            [float(r[metric]) for r in ok],
            xerr=_error_bars(ok, metric),
            capsize=3,
        )
        ax.set_ylabel("job")
        ax.set_xlabel(metric)
    ranges = " (bars: min-max over the repeats)" if _error_bars(ok, metric) else ""
    ax.set_title(f"{metric}: {title_counts(rows, ok)}")
    ax.set_xlabel(ax.get_xlabel() + ranges)
    ax.grid(alpha=0.3)
    if not timed:  # a constrained layout places itself
        fig.tight_layout()
    fig.savefig(path)


def plot_folds(groups: list[dict[str, str]], metric: str, path: Path) -> None:
    """One bar per k-fold group: the mean of `metric` over its folds, ± its standard
    deviation as the error bar; groups without a mean (a fold mismatch) are counted apart."""
    shown = [g for g in groups if g.get(metric)]
    keys = swept_keys(groups)  # what tells the groups apart: their bars' labels
    labels = [
        " ".join(f"{k}={settings(g['overrides']).get(k, '')}" for k in keys) or "all" for g in shown
    ]
    fig, ax = _figure()
    ax.barh(
        [f"{label} [{g['folds']} folds]" for label, g in zip(labels, shown, strict=True)],
        [float(g[metric]) for g in shown],
        xerr=[float(g.get(f"{metric}_std") or 0) for g in shown],
        capsize=4,
    )
    ax.set_xlabel(f"{metric}: mean over the folds (bars: ± std)")
    left_out = len(groups) - len(shown)
    ax.set_title(
        f"{metric}: {len(shown)} groups" + (f", {left_out} without a mean" * bool(left_out))
    )
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path)
