"""One run at a time in a run dir (engine/src/engine/runs/run_lock.py), against another process
that holds the lock: a second run in a busy fixed hydra.run.dir, or a second multirun in a busy
sweep dir, is refused in one line before it writes anything; a killed run's lock is gone with
it, forked workers and all (multiruns whose jobs would share a folder, in-process:
test_shared_run_dirs.py)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

from engine.runs.run_lock import claim, release
from engine_dev.cli import run_script
from tests.conftest import TRAIN, reference_args
from tests.test_shared_run_dirs import TINY

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
        cwd=lock.parent.parent,
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
    args = reference_args(demo_dir, tmp_path, f"hydra.run.dir={run}", *TINY)
    try:
        done = run_script(TRAIN, *args, cwd=tmp_path)
    finally:
        _kill(proc)
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 1 and len(lines) == 1, done.stderr
    assert f"{run} is in use by another run (pid {pid} " in lines[0] and "hydra.run.dir" in lines[0]
    assert sorted(os.listdir(run)) == [".run.lock"]  # no .hydra/, no log, no checkpoint
    done = run_script(TRAIN, *args, cwd=tmp_path)  # the holder was killed: its lock went with it
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


def test_a_second_multirun_in_a_busy_sweep_dir_is_refused_before_its_first_job(tmp_path):
    sweep = tmp_path / "sweep"
    proc, (pid, _) = _holder(sweep / ".sweep.lock")
    try:
        done = run_script(
            TRAIN, "-m", "trainer.seed=1,2", f"paths.log_dir={tmp_path}",
            f"hydra.sweep.dir={sweep}", *TINY, cwd=tmp_path,
        )  # fmt: skip
    finally:
        _kill(proc)
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 1 and len(lines) == 1, done.stderr
    assert lines[0].startswith(f"{sweep} is in use by another multirun (pid {pid} ")
    assert sorted(os.listdir(sweep)) == [".sweep.lock"]  # no job, no multirun.yaml, no summary
