"""A PNG of a sweep: the ranking metric against num_workers, one line per batch size."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # files only; no display needed
import matplotlib.pyplot as plt

from src.sweeps.table import LOWER_IS_BETTER

X_KEY, SERIES_KEY = "loader.num_workers", "loader.batch_size"


def parse_overrides(text: str) -> dict[str, str]:
    """`"a.b=1 c=x"` -> {"a.b": "1", "c": "x"}."""
    return dict(item.split("=", 1) for item in text.split() if "=" in item)


def plot_sweep(rows: list[dict[str, str]], metric: str, path: Path) -> None:
    """Lines of `metric` over loader.num_workers when swept, else one bar per job."""
    ok = [r for r in rows if r["status"] == "ok" and r.get(metric)]
    fig, ax = plt.subplots(figsize=(7, 4.5), dpi=100)
    swept = [parse_overrides(r["overrides"]) for r in ok]
    if ok and all(X_KEY in s for s in swept):
        # numbers in numeric order, anything else (e.g. "auto") after them, as categories
        xs = sorted(
            {s[X_KEY] for s in swept},
            key=lambda v: (not v.isdigit(), int(v) if v.isdigit() else 0, v),
        )
        lines: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
        for row, settings in zip(ok, swept, strict=True):
            series = f"batch_size={settings[SERIES_KEY]}" if SERIES_KEY in settings else "all"
            lines[series][settings[X_KEY]].append(float(row[metric]))
        best = min if metric in LOWER_IS_BETTER else max
        for series, points in sorted(lines.items()):
            present = [x for x in xs if x in points]
            # several jobs share a point when other keys were swept too: plot their best
            ax.plot(
                [xs.index(x) for x in present],
                [best(points[x]) for x in present],
                marker="o",
                label=series,
            )
        ax.set_xticks(range(len(xs)), xs)
        ax.set_xlabel(X_KEY)
        ax.set_ylabel(f"{metric} (best job per point)")
        ax.legend()
    else:
        ax.barh([f"#{r['job']}" for r in ok], [float(r[metric]) for r in ok])
        ax.set_ylabel("job")
        ax.set_xlabel(metric)
    ax.set_title(f"{metric}: {len(ok)} jobs finished, {len(rows) - len(ok)} failed")
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
