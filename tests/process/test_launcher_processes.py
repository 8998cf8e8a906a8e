"""The submitit launcher of the `scale` extra (its local executor standing in for SLURM) runs a
sweep's jobs as separate processes: train.py in a child, which must hand its project root to
them (the Optuna sweeper, in-process: tests/test_launchers.py)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.test_launchers import TINY, _rows

ROOT = Path(__file__).resolve().parents[2]


def test_submitit_local_launcher_runs_a_two_job_sweep(demo_dir: Path, tmp_path: Path) -> None:
    sweep = tmp_path / "sweep"
    command = [
        sys.executable,
        str(ROOT / "train.py"),
        "-m",
        f"paths.demo_dir={demo_dir}",
        f"hydra.sweep.dir={sweep}",
        f"paths.log_dir={tmp_path}",
        *TINY,
        "hydra/launcher=local",
        "loader.batch_size=8,16",
    ]
    # cwd outside the checkout: the jobs must find `src` on their own
    result = subprocess.run(command, cwd=tmp_path, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr[-4000:]
    assert "Submitit 'local' sweep output dir" in result.stdout + result.stderr
    rows = _rows(sweep)
    assert sorted((r["job"], r["status"]) for r in rows) == [("0", "ok"), ("1", "ok")]
    jobs = sorted(sweep.glob("[01]_*/metrics.json"))
    assert len(jobs) == 2 and all(json.loads(p.read_text())["epochs"] == 1 for p in jobs)
    # each job ran in a submitit process of its own, with its own log
    assert len(list(sweep.glob(".submitit/*/*_0_log.out"))) == 2
