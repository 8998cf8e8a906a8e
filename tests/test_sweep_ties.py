"""A loader sweep over repeated measurements, run as a user runs it: ranges, ties with the best
job, and jobs that would run what an earlier job ran (listed as `same as job N`, not run
again). Ties and notes on hand-made rows: the engine's tests/test_sweep_ranking.py."""

from __future__ import annotations

import csv
import json
from pathlib import Path

from tests.cli import run_cli

ROOT = Path(__file__).resolve().parents[1]
METRIC = "loader/samples_per_s"


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
