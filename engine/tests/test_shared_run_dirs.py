"""One run at a time in a run dir (engine/src/engine/runs/run_lock.py), on the reference
project: a multirun whose jobs would share a folder is refused in one line before its first
job, or stopped at the job that lands in an earlier job's folder. Against a run holding the
lock in another process (a busy run or sweep dir, a killed run's forked workers):
process/test_shared_run_dir_processes.py."""

from __future__ import annotations

import json

from engine_dev.cli import run_script
from tests.conftest import TRAIN

TINY = (
    "trainer.max_epochs=1",
    "trainer.limit_train_batches=1",
    "trainer.limit_val_batches=1",
    "loader.num_workers=0",
)


def test_a_multirun_whose_subdir_names_no_job_is_refused_before_its_first_job(tmp_path):
    sweep = tmp_path / "sweep"
    done = run_script(
        TRAIN, "-m", "trainer.seed=1,2", f"paths.log_dir={tmp_path}", f"hydra.sweep.dir={sweep}",
        "hydra.sweep.subdir=same", *TINY, cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 1
    assert done.stderr.strip().splitlines() == [
        "hydra.sweep.subdir=same gives every job of this multirun the same folder, where they "
        "would write over each other's files: keep ${hydra.job.num} in it."
    ]
    assert not sweep.exists()


def test_a_multirun_job_landing_in_an_earlier_jobs_folder_stops_there(demo_dir, tmp_path):
    """paths.* keys are left out of job folder names: two jobs differing only there share one
    when hydra.sweep.subdir has no job number. The second stops before it writes."""
    sweep = tmp_path / "sweep"
    done = run_script(
        TRAIN, "-m", f"paths.demo_dir={demo_dir},{demo_dir}/.", f"paths.log_dir={tmp_path}",
        f"hydra.sweep.dir={sweep}", "hydra.sweep.subdir=j${hydra.job.override_dirname}",
        "trainer.seed=3", *TINY, cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 1
    folder = next(p for p in sweep.iterdir() if p.is_dir())
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith(f"{folder} was the folder of job 0 of this multirun, and job 1 would")
    assert (folder / ".hydra" / "overrides.yaml").read_text().count(f"{demo_dir}/.") == 0
    assert json.loads((folder / "metrics.json").read_text())["epochs"] == 1
    assert "job 1" not in (folder / "train.log").read_text()
    rows = (sweep / "summary.csv").read_text().splitlines()
    assert len(rows) == 2 and rows[1].startswith("0,ok,")
