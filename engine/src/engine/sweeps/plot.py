"""A PNG of a sweep: the ranking metric against num_workers, one line per batch size; with
repeated measurements, each point's range [min-max] as an error bar; for k-fold groups, each
group's mean ± std."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path
from typing import TYPE_CHECKING

from engine.sweeps.table import LOWER_IS_BETTER, spread_of

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

X_KEY, SERIES_KEY = "loader.num_workers", "loader.batch_size"


def parse_overrides(text: str) -> dict[str, str]:
    """`"a.b=1 c=x"` -> {"a.b": "1", "c": "x"}."""
    return dict(item.split("=", 1) for item in text.split() if "=" in item)


def swept_keys(rows: list[dict[str, str]]) -> list[str]:
    """The override keys whose value differs between the sweep's jobs (a key some jobs lack
    differs too), in first-seen order."""
    parsed = [
        {key.lstrip("+~"): value for key, value in parse_overrides(row["overrides"]).items()}
        for row in rows
    ]
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
    from matplotlib.figure import Figure

    figure = Figure(figsize=(7, 4.5), dpi=100)
    return figure, figure.subplots()


def plot_sweep(rows: list[dict[str, str]], metric: str, path: Path) -> None:
    """Lines of `metric` over loader.num_workers when swept, else one bar per job; ranges
    [min-max] as error bars where the rows have them."""
    ok = [r for r in rows if r["status"] == "ok" and r.get(metric)]
    fig, ax = _figure()
    swept = [parse_overrides(r["overrides"]) for r in ok]
    if ok and all(X_KEY in s for s in swept):
        # numbers in numeric order, anything else (e.g. "auto") after them, as categories
        xs = sorted(
            {s[X_KEY] for s in swept},
            key=lambda v: (not v.isdigit(), int(v) if v.isdigit() else 0, v),
        )
        lines: dict[str, dict[str, list[dict[str, str]]]] = defaultdict(lambda: defaultdict(list))
        for row, settings in zip(ok, swept, strict=True):
            series = f"batch_size={settings[SERIES_KEY]}" if SERIES_KEY in settings else "all"
            lines[series][settings[X_KEY]].append(row)
        best = min if metric in LOWER_IS_BETTER else max
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
    fig.tight_layout()
    fig.savefig(path)


def plot_folds(groups: list[dict[str, str]], metric: str, path: Path) -> None:
    """One bar per k-fold group: the mean of `metric` over its folds, ± its standard
    deviation as the error bar; groups without a mean (a fold mismatch) are counted apart."""
    shown = [g for g in groups if g.get(metric)]
    keys = swept_keys(groups)  # what tells the groups apart: their bars' labels
    labels = [
        " ".join(f"{k}={parse_overrides(g['overrides']).get(k, '')}" for k in keys) or "all"
        for g in shown
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
