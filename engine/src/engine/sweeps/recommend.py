"""The one setting a sweep recommends: among the jobs tied with the best (their ranges of the
ranking metric overlap the best job's: `tied = yes`), the one with the fewest loader workers,
then the least memory (`loader/peak_rss_mb`, where the mode records it); without ranges the
best job itself."""

from __future__ import annotations

import math

from engine.sweeps.plot import settings, swept_keys
from engine.sweeps.table import TIED

WORKERS, MEMORY = "loader.num_workers", "loader/peak_rss_mb"


def _number(text: str | None) -> float:
    """`text` as a number; an unknown or non-numeric value (num_workers=auto) sorts last."""
    try:
        return float(text)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return math.inf


def recommended(ranked: list[dict[str, str]]) -> dict[str, str] | None:
    """The recommended row of `ranked` (ranked and tie-marked rows), None when none ran ok."""
    ok = [r for r in ranked if r["status"] == "ok"]
    tied = [r for r in ok if r.get(TIED) == "yes"] or ok[:1]
    if not tied:
        return None
    return min(
        tied,
        key=lambda r: (
            _number(settings(r["overrides"]).get(WORKERS)),
            _number(r.get(MEMORY)),
        ),
    )


def setting(row: dict[str, str], rows: list[dict[str, str]]) -> str:
    """The keys the sweep varied as `row` sets them, but those that cannot apply to it (its
    `runs_as` changed them: persistent_workers with 0 workers); its overrides if none."""
    given, runs = (settings(row.get(column, "")) for column in ("overrides", "runs_as"))
    applied = [k for k in swept_keys(rows) if k in given and runs.get(k, given[k]) == given[k]]
    shown = [f"{k}={given[k]}" for k in applied]
    return " ".join(shown) or row["overrides"]


def recommendation(ranked: list[dict[str, str]], metric: str) -> str | None:
    """The line saying which setting to use and why, or None when no job ran ok."""
    row = recommended(ranked)
    if row is None:
        return None
    tied = sum(r.get(TIED) == "yes" for r in ranked)
    why = (
        f"of the {tied} jobs tied with the best by {metric}, the fewest workers, then the "
        "least memory"
        if tied > 1
        else f"the best by {metric}"
    )
    workers, memory = settings(row["overrides"]).get(WORKERS), _number(row.get(MEMORY))
    details = (
        [f"{workers} worker{'' if str(workers) == '1' else 's'}"] if workers is not None else []
    )
    details += [f"{memory:.0f} MB peak RSS"] if memory < math.inf else []
    shown = f" ({', '.join(details)})" if details else ""
    return f"Recommended: job {row['job']}: {setting(row, ranked)}{shown}; {why}."
