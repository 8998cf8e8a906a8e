"""Sweeps over repeated measurements: ranges, ties with the best job, and jobs that would run
what an earlier job ran (listed as `same as job N`, not run again)."""

from __future__ import annotations

import csv
import json
from pathlib import Path

from engine.sweeps.plot import plot_sweep
from engine.sweeps.summary import notes
from engine.sweeps.table import mark_tied, rank
from tests.cli import run_cli

ROOT = Path(__file__).resolve().parents[1]
METRIC = "loader/samples_per_s"


def _row(job: int, median: float, low: float, high: float, status: str = "ok") -> dict[str, str]:
    values = [median, low, high] if status == "ok" else ["", "", ""]
    keys = (METRIC, f"{METRIC}_min", f"{METRIC}_max")
    return {
        "job": str(job),
        "status": status,
        "overrides": f"loader.num_workers={job % 3} loader.batch_size={32 * (1 + job // 3)}",
        **{k: str(v) for k, v in zip(keys, values, strict=True)},
    }


def test_jobs_whose_range_overlaps_the_best_are_tied() -> None:
    rows = [
        _row(0, 1000, 900, 1100),
        _row(1, 3000, 2000, 3100),  # best median
        _row(2, 2500, 2900, 2950),  # overlaps the best's 2000-3100
        _row(3, 1900, 1800, 1999),  # just below the best's min
        _row(4, 0, 0, 0, status="same as job 1"),
    ]
    ranked = mark_tied(rank(rows, METRIC), METRIC)
    assert [(r["job"], r["tied"]) for r in ranked] == [
        ("1", "yes"),
        ("2", "yes"),
        ("3", "no"),
        ("0", "no"),
        ("4", ""),
    ]
    said = notes(ranked, METRIC)
    assert "cannot be told apart" in said[0] and "jobs 1, 2 overlap" in said[0]
    assert said[1].startswith("1 job did not run") and "`same as job N`" in said[1]


def test_a_clear_winner_is_said_and_the_plot_draws_ranges(tmp_path: Path) -> None:
    ranked = mark_tied(rank([_row(0, 10, 9, 11), _row(1, 50, 45, 55)], METRIC), METRIC)
    assert notes(ranked, METRIC) == [
        f"Job 1 is ahead of every other job in every repeat ({METRIC})."
    ]
    plot_sweep(ranked, METRIC, tmp_path / "p.png")
    assert (tmp_path / "p.png").stat().st_size > 0


def test_jobs_that_normalise_to_an_earlier_job_are_listed_not_run(
    demo_dir: Path, tmp_path: Path
) -> None:
    result = run_cli(
        "-m",
        "mode=benchmark",
        "benchmark.batches=2",
        "benchmark.warmup=1",
        "benchmark.repeats=2",
        f"paths.demo_dir={demo_dir}",
        f"hydra.sweep.dir={tmp_path}",
        "loader.batch_size=8",
        "loader.num_workers=0,1",
        "loader.prefetch_factor=2,4",
        cwd=ROOT,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    with open(tmp_path / "summary.csv", newline="") as f:
        rows = {r["job"]: r for r in csv.DictReader(f)}
    # jobs: 0 = (0 workers, prefetch 2), 1 = (0, 4), 2 = (1, 2), 3 = (1, 4)
    assert rows["1"]["status"] == "same as job 0" and rows["1"][METRIC] == ""
    assert [rows[j]["status"] for j in "023"] == ["ok", "ok", "ok"]
    assert rows["0"]["runs_as"] == rows["1"]["runs_as"] != rows["2"]["runs_as"]
    assert "loader.prefetch_factor=None" in rows["0"]["runs_as"]
    best = max("023", key=lambda j: float(rows[j][METRIC]))
    assert rows[best]["tied"] == "yes" and {rows[j]["tied"] for j in "023"} <= {"yes", "no"}
    for job in "023":
        low, mid, high = (float(rows[job][f"{METRIC}{s}"]) for s in ("_min", "", "_max"))
        assert 0 < low <= mid <= high
    (job0,) = tmp_path.glob("0_*")
    (job1,) = tmp_path.glob("1_*")
    reused = json.loads((job1 / "metrics.json").read_text())  # job 0's, marked
    assert reused == json.loads((job0 / "metrics.json").read_text()) | {"same_as": 0}
    assert not (job1 / "tensorboard").exists()  # it did not run
    md = (tmp_path / "summary.md").read_text()
    assert "| same as job 0 |" in md and "1 job did not run" in md
    assert "1 job did not run" in result.stderr + result.stdout
