"""`make bench-start`: what starting loader workers by forkserver (the default under torchrun,
engine/src/engine/data/resolve_loader.py) costs against fork, side by side in one run.

Each measurement is a fresh process that builds the demo training's loaders as train.py does
(`assemble`, 2 workers) and times two epochs of the train loader: its first batch (for
forkserver this includes starting the server, once per process), the epoch, and the second
epoch's re-entry (its `iter()` to the first batch: with persistent workers nothing starts;
without, the workers start again, forked from the server). Rows alternate fork / forkserver,
order swapped every round; ratios are medians of the per-round ratios (forkserver / fork).

    python -m bench.start_methods [--rounds 5] [--no-write]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from datetime import date
from pathlib import Path

from bench import blocks, report
from bench.template import build, template_config
from engine.data.loaders import set_epoch
from engine_dev.demo import make_demo_data

ROOT = Path(__file__).resolve().parents[1]
BLOCK = "make bench-start"
METHODS = ("fork", "forkserver")
TIMES = ("first_batch_s", "epoch_s", "reentry_s")


def measure(method: str, persistent: bool, demo: Path) -> dict[str, float]:
    """Child process: two epochs of the demo train loader started by `method`."""
    cfg = template_config(
        f"paths.demo_dir={demo}",
        "loader.num_workers=2",
        f"loader.multiprocessing_context={method}",
        f"loader.persistent_workers={str(persistent).lower()}",
    )
    loader = build(cfg).train_loader
    times = {}
    for epoch, first in ((1, "first_batch_s"), (2, "reentry_s")):
        set_epoch(loader, epoch)
        start = time.perf_counter()
        batches = iter(loader)
        next(batches)
        times[first] = time.perf_counter() - start
        for _ in batches:
            pass
        if epoch == 1:
            times["epoch_s"] = time.perf_counter() - start
    return times


def _child(method: str, persistent: bool, demo: Path) -> dict[str, float]:
    command = [sys.executable, "-m", "bench.start_methods", "--child", method, str(persistent)]
    done = subprocess.run(
        [*command, str(demo)], cwd=ROOT, capture_output=True, text=True, check=False
    )
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(command)} failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def run(rounds: int) -> str:
    """The section's markdown: per persistence, a row per method and time, and the ratios."""
    started = time.monotonic()
    lines = []
    with tempfile.TemporaryDirectory() as tmp:
        demo = make_demo_data(Path(tmp) / "demo", train_per_class=(120,) * 5, val_per_class=20)
        for persistent in (True, False):
            got: dict[str, dict[str, list[float]]] = {m: {t: [] for t in TIMES} for m in METHODS}
            for r in range(rounds):
                for method in METHODS if r % 2 == 0 else METHODS[::-1]:
                    times = _child(method, persistent, demo)
                    for key in TIMES:
                        got[method][key].append(times[key])
            rows = []
            for key in TIMES:
                for method in METHODS:
                    rows.append((f"{key}, {method}", got[method][key]))
                ratios = [
                    s / f for s, f in zip(got["forkserver"][key], got["fork"][key], strict=True)
                ]
                rows.append((f"{key}, forkserver / fork", ratios))
            title = (
                f"persistent_workers={str(persistent).lower()}: 600 demo images (48 px), "
                "batch 32, 2 workers, seconds"
            )
            lines += [report.value_table(title, rows), ""]
    wall = time.monotonic() - started
    head = (
        f"## Loader worker start methods: `make bench-start` ({date.today()})\n\n"
        f"`make bench-start` (= `python -m bench.start_methods --rounds {rounds}`), "
        f"{wall:.0f} s wall. Machine: {report.machine()}.\n\n"
        "Each round is two fresh processes, fork and forkserver in alternating order; each "
        "builds the demo training's loaders as train.py does and times two epochs of the "
        "train loader. first_batch_s includes the forkserver's start (once per process); "
        "reentry_s is the second epoch's iter() to its first batch.\n"
    )
    return head + "\n" + "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--no-write", action="store_true", help="print only")
    parser.add_argument("--child", nargs=3, metavar=("METHOD", "PERSISTENT", "DEMO"))
    args = parser.parse_args()
    if args.child:
        method, persistent, demo = args.child
        print(json.dumps(measure(method, persistent == "True", Path(demo))))
        return
    blocks.publish(run(args.rounds), BLOCK, not args.no_write, ROOT / "BENCHMARKS.md")


if __name__ == "__main__":
    main()
