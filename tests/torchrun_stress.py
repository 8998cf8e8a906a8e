"""`make stress-torchrun RUNS=20`: consecutive `torchrun --nproc_per_node=2 train.py
loader.num_workers=2` jobs over map-style data (the demo ImageFolder), local tar shards and
the same shards over HTTP, each with a deadline, so a hang counts as one instead of lasting.

Every worker of such a job starts from a process that runs threads (the process group's, the
loaders' queue feeders), where forking could hang in os.fork() (CPython gh-112275); the
engine starts them by forkserver there (engine/src/engine/data/resolve_loader.py). Pass `fork` as the
second argument to count the hangs of plain fork instead:

    python -m tests.torchrun_stress RUNS [fork]
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from engine_dev.shard_server import serving
from tests.process.test_distributed import torchrun

ROOT = Path(__file__).resolve().parents[1]
DEADLINE_S = 300  # a 2-epoch job takes well under a minute on 2 cores
JOB = (
    "trainer.max_epochs=2",
    "loader.num_workers=2",
    "loader.batch_size=32",
    "model.widths=[8,16]",
)
SHARDS = ("train-{000000..000007}.tar", "val-{000000..000001}.tar")


def _kinds(url: str) -> dict[str, tuple[str, ...]]:
    train, val = SHARDS
    return {
        "map-style (imagefolder)": (),
        "local shards": ("dataset=iterable",),
        "HTTP shards": (
            "dataset=iterable",
            f'dataset.train_shards="{url}/{train}"',
            f'dataset.val_shards="{url}/{val}"',
        ),
    }


def main(runs: int, start_method: str | None) -> int:
    demo = ROOT / "data" / "demo"
    method = () if start_method is None else (f"loader.multiprocessing_context={start_method}",)
    failed = 0
    with tempfile.TemporaryDirectory() as tmp, serving(demo / "shards") as url:
        for kind, overrides in _kinds(url).items():
            walls, hangs, errors = [], 0, 0
            for i in range(runs):
                logs = Path(tmp) / f"{kind.split()[0]}-{i}"
                logs.mkdir()
                args = (f"paths.demo_dir={demo}", f"paths.log_dir={logs}", *JOB, *method)
                start = time.monotonic()
                try:
                    done = torchrun(*args, *overrides, cwd=logs, deadline_s=DEADLINE_S)
                except subprocess.TimeoutExpired:  # the job's processes are killed by now
                    hangs += 1
                    print(f"{kind} run {i + 1}: HUNG (no end within {DEADLINE_S} s)", flush=True)
                    continue
                if done.returncode != 0:
                    errors += 1
                    print(f"{kind} run {i + 1}: exit {done.returncode}\n{done.stderr[-2000:]}")
                    continue
                walls.append(time.monotonic() - start)
            median = statistics.median(walls) if walls else float("nan")
            print(
                f"{kind}: {runs} runs, {len(walls)} ended, {hangs} hung, {errors} failed; "
                f"median {median:.1f} s a job",
                flush=True,
            )
            failed += hangs + errors
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(int(sys.argv[1]), sys.argv[2] if len(sys.argv) > 2 else None))
