"""train.py as a user starts it, in child processes: two runs started together get a run dir
each, and the default training learns the demo set (the README's promise; slow). train() in
this process, on each dataset kind: tests/test_train.py."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.train_process import run_train

ROOT = Path(__file__).resolve().parents[2]


def test_two_runs_started_together_get_separate_dirs(demo_dir: Path, tmp_path: Path) -> None:
    args = [
        sys.executable,
        str(ROOT / "train.py"),
        f"paths.demo_dir={demo_dir}",
        f"paths.log_dir={tmp_path}",
        "trainer.max_epochs=1",
        "trainer.limit_train_batches=1",
        "loader.batch_size=8",
        "loader.num_workers=0",
    ]
    procs = [
        subprocess.Popen(
            args, cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
        )
        for _ in range(2)
    ]
    for proc in procs:
        assert proc.wait() == 0, proc.stderr.read()[-3000:] if proc.stderr else ""
    runs = sorted(tmp_path.glob("runs/*/*/metrics.json"))
    assert len(runs) == 2


@pytest.mark.slow
@pytest.mark.timeout(1200)
def test_default_training_learns_the_demo_set(tmp_path: Path) -> None:
    """The README's promise: `make train` reaches val/acc >= 0.90 on the demo data."""
    result = run_train(f"paths.log_dir={tmp_path}", cwd=ROOT)
    assert result.returncode == 0, result.stderr[-3000:]
    metrics = json.loads(next(tmp_path.glob("runs/*/*/metrics.json")).read_text())
    assert metrics["val/acc"] >= 0.90, metrics
