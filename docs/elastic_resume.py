"""The elastic-resume run the engine manual's scaling.md shows
(`make docs-outputs NAMES=elastic-resume`).

On the demo data: an uninterrupted torchrun job of 2 ranks x 1 worker; the same job killed
with -9 (the whole process group, from outside) soon after a mid-epoch checkpoint; that run
resumed as one process with 2 loader workers and twice the batch. It prints what it compares:
each optimizer step's set of samples (samples.csv) against the uninterrupted job's, how often
each train sample was used in each epoch, and the final val/loss.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil

from engine_dev.api import samples_by_step, uses_by_epoch

ROOT = Path(__file__).resolve().parents[1]
PY = sys.executable
RUN = [
    "trainer.max_epochs=2",
    "model=mlp",  # no BatchNorm, whose statistics are per rank
    "model.dropout=0",
    "trainer.record_samples=true",
    "trainer.checkpoint.every_n_steps=10",
    "logger=csv",
    "loader.drop_last=false",  # every sample in every epoch, so the check below can count them
]
TWO_RANKS = ["loader.batch_size=32", "loader.num_workers=1"]
ONE_PROCESS = ["loader.batch_size=64", "loader.num_workers=2"]
TORCHRUN = [PY, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2", "train.py"]
KILL_AFTER = "step00000040.pt"  # epoch 2, its 10th step of 30


def val_loss(run: Path) -> float:
    return json.loads((run / "metrics.json").read_text())["val/loss"]


def killed_job(run: Path) -> None:
    """The 2-rank job, killed with -9 once the checkpoint KILL_AFTER is on disk: the agent
    and every process under it (torchrun starts each rank in a session of its own, so a
    signal to the agent's process group alone would leave the ranks training)."""
    job = subprocess.Popen(
        [*TORCHRUN, f"hydra.run.dir={run}", *RUN, *TWO_RANKS],
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    while not (run / "checkpoints" / KILL_AFTER).exists():
        if job.poll() is not None:
            raise SystemExit("the job ended before its checkpoint")
        time.sleep(0.05)
    tree = [job.pid, *(p.pid for p in psutil.Process(job.pid).children(recursive=True))]
    for pid in tree:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    job.wait()


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        whole, run = Path(tmp) / "whole", Path(tmp) / "run"
        subprocess.run(
            [*TORCHRUN, f"hydra.run.dir={whole}", *RUN, *TWO_RANKS], cwd=ROOT, check=True
        )
        expected = samples_by_step(whole)
        print(f"uninterrupted: torchrun 2 ranks x 1 worker, batch 32 x 2: {len(expected)} steps")
        killed_job(run)
        lost = max(samples_by_step(run))
        print(f"killed with -9 after the checkpoint {KILL_AFTER}: samples.csv ends at step {lost}")
        resumed = subprocess.run(
            [PY, "train.py", f"hydra.run.dir={run}", *RUN, *ONE_PROCESS, "trainer.resume=auto"],
            cwd=ROOT,
            capture_output=True,
            text=True,
            check=True,
        )
        for line in (resumed.stdout + resumed.stderr).splitlines():
            if "resumed from" in line or "[engine.training.assemble]" in line:
                print(line.split("] - ", 1)[-1].replace(f"{tmp}/", ""))
        got = samples_by_step(run)
        same = sum(got.get(step) == indices for step, indices in expected.items())
        print(f"steps with the uninterrupted job's samples: {same} of {len(expected)}")
        size = len(uses_by_epoch(whole)[1])
        once = sum(
            sorted(c) == list(range(size)) and set(c.values()) == {1}
            for c in uses_by_epoch(run).values()
        )
        print(f"epochs using each of the {size} train samples exactly once: {once} of 2")
        a, b = val_loss(whole), val_loss(run)
        print(
            f"final val/loss: {b:.6f} resumed, {a:.6f} uninterrupted (difference {abs(a - b):.1e})"
        )


if __name__ == "__main__":
    main()
