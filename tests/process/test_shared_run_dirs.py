"""One run at a time in a run dir (engine/src/engine/runs/run_lock.py): a second run started in a busy
fixed hydra.run.dir, or a multirun whose jobs would share a folder, is refused in one line
before it writes anything; a killed run's lock is gone with it, forked workers and all."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

from engine.runs.run_lock import claim, release
from tests.cli import run_cli
from tests.conftest import NARROW_MODEL

ROOT = Path(__file__).resolve().parents[2]
TINY = (
    "trainer.max_epochs=1",
    "trainer.limit_train_batches=1",
    "trainer.limit_val_batches=1",
    "loader.num_workers=0",
    NARROW_MODEL,
)
# A process that holds the lock file argv[1], then (argv[2] == "fork") forks a child that
# outlives it, prints its pid(s) and waits to be killed. The pids are printed once the child
# says, through a pipe, that its fork has returned (its at-fork hooks have run): on a busy
# machine the child may be scheduled long after the parent.
HOLDER = """
import os, sys, time
from engine.core.folder_lock import hold
hold(sys.argv[1])
ready, say = os.pipe()
child = os.fork() if sys.argv[2] == "fork" else -1
if child == 0:
    os.write(say, b"x")
    time.sleep(600)
    os._exit(0)
if child > 0:
    os.read(ready, 1)
print(os.getpid(), child, flush=True)
time.sleep(600)
"""


def _holder(lock: Path, fork: bool = False) -> tuple[subprocess.Popen, list[int]]:
    proc = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(lock), "fork" if fork else "-"],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        text=True,
    )
    return proc, [int(pid) for pid in proc.stdout.readline().split()]  # type: ignore[union-attr]


def _kill(proc: subprocess.Popen) -> None:
    proc.send_signal(signal.SIGKILL)
    proc.wait()


def test_a_second_run_in_a_busy_run_dir_is_refused_having_written_nothing(demo_dir, tmp_path):
    run = tmp_path / "run"
    proc, (pid, _) = _holder(run / ".run.lock")
    args = (f"paths.demo_dir={demo_dir}", f"paths.log_dir={tmp_path}", f"hydra.run.dir={run}")
    try:
        done = run_cli(*args, *TINY, cwd=tmp_path)
    finally:
        _kill(proc)
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 1 and len(lines) == 1, done.stderr
    assert f"{run} is in use by another run (pid {pid} " in lines[0] and "hydra.run.dir" in lines[0]
    assert sorted(os.listdir(run)) == [".run.lock"]  # no .hydra/, no log, no checkpoint
    done = run_cli(*args, *TINY, cwd=tmp_path)  # the holder was killed: its lock went with it
    assert done.returncode == 0, done.stderr[-2000:]
    assert (run / "metrics.json").is_file()


def test_a_killed_runs_forked_children_do_not_keep_its_dir(tmp_path: Path) -> None:
    proc, (_, child) = _holder(tmp_path / "run" / ".run.lock", fork=True)
    _kill(proc)  # its forked child (a loader worker) lives on
    try:
        claim(tmp_path / "run")
        release(tmp_path / "run")
    finally:
        os.kill(child, signal.SIGKILL)


def test_a_multirun_whose_subdir_names_no_job_is_refused_before_its_first_job(tmp_path):
    sweep = tmp_path / "sweep"
    done = run_cli(
        "-m", "trainer.seed=1,2", f"hydra.sweep.dir={sweep}", "hydra.sweep.subdir=same", *TINY,
        cwd=tmp_path,
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
    done = run_cli(
        "-m", f"paths.demo_dir={demo_dir},{demo_dir}/.", f"hydra.sweep.dir={sweep}",
        "hydra.sweep.subdir=j${hydra.job.override_dirname}", "trainer.seed=3", *TINY,
        cwd=tmp_path,
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


def test_a_second_multirun_in_a_busy_sweep_dir_is_refused_before_its_first_job(tmp_path):
    sweep = tmp_path / "sweep"
    proc, (pid, _) = _holder(sweep / ".sweep.lock")
    try:
        done = run_cli("-m", "trainer.seed=1,2", f"hydra.sweep.dir={sweep}", *TINY, cwd=tmp_path)
    finally:
        _kill(proc)
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 1 and len(lines) == 1, done.stderr
    assert lines[0].startswith(f"{sweep} is in use by another multirun (pid {pid} ")
    assert sorted(os.listdir(sweep)) == [".sweep.lock"]  # no job, no multirun.yaml, no summary
