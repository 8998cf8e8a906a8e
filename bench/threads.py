"""`make bench-threads`: the main process's torch threads on a CPU, auto (`trainer.num_threads`
null: the usable cores less the loader workers) against torch's default (every core), on a
quiet machine and beside a second busy process, side by side in one run.

Each measurement is `train.py mode=benchmark benchmark.compute=model` (the demo data, its
train loader with the default worker count, and the real train step) in a fresh process;
rows alternate auto / default, order swapped every round. The busy neighbour is a process
multiplying matrices on torch's default threads, as a second training on the machine would.
Ratios are medians of the per-round ratios (auto / default).

    python -m bench.threads [--rounds 3] [--no-write]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import date
from pathlib import Path

import torch

from bench import blocks, report
from engine.core.cpus import available_cpus, main_threads

ROOT = Path(__file__).resolve().parents[1]
BLOCK = "make bench-threads"
BATCHES, WARMUP = 40, 5  # timed train steps per measurement, and untimed ones before them
BUSY = "import torch\na = torch.randn(512, 512)\nwhile True:\n    a = (a @ a).tanh()\n"


def measure(threads: int | None, out: Path) -> float:
    """Samples/s of the demo train loader feeding the train step, with `threads` (None =
    auto), in a fresh `train.py` process."""
    setting = "null" if threads is None else str(threads)
    command = [
        sys.executable, "train.py", "mode=benchmark", "benchmark.compute=model",
        f"benchmark.batches={BATCHES}", f"benchmark.warmup={WARMUP}", "benchmark.repeats=1",
        f"trainer.num_threads={setting}", f"hydra.run.dir={out}",
    ]  # fmt: skip
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(command)} failed:\n{done.stderr[-3000:]}")
    return json.loads((out / "metrics.json").read_text())["loader/samples_per_s"]


@contextmanager
def neighbour(busy: bool) -> Iterator[None]:
    """A second process busy on every core for the duration (when `busy`)."""
    if not busy:
        yield
        return
    proc = subprocess.Popen([sys.executable, "-c", BUSY])
    try:
        time.sleep(2)  # its torch import done: busy from the first measurement on
        yield
    finally:
        proc.kill()
        proc.wait()


def run(rounds: int) -> str:
    """The section's markdown: per condition, a row per setting and the ratio."""
    started, default = time.monotonic(), torch.get_num_threads()
    auto = main_threads(1)  # the demo's default loader: half of 2 cores = 1 worker
    rows: list[tuple[str, list[float]]] = []
    ratios: dict[str, float] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for busy in (False, True):
            got: dict[str, list[float]] = {"auto": [], "default": []}
            with neighbour(busy):
                for r in range(rounds):
                    for name in ("auto", "default") if r % 2 == 0 else ("default", "auto"):
                        out = Path(tmp) / f"{busy}_{r}_{name}"
                        got[name].append(measure(None if name == "auto" else default, out))
            where = "beside a busy process" if busy else "quiet"
            paired = [a / d for a, d in zip(got["auto"], got["default"], strict=True)]
            ratios[where] = statistics.median(paired)
            rows += [
                (f"{where}: auto ({auto} thread{'s' * (auto > 1)})", got["auto"]),
                (f"{where}: torch default ({default} threads)", got["default"]),
                (f"{where}: auto / default", paired),
            ]
    wall = time.monotonic() - started
    table = report.value_table(
        f"demo data (48 px), small_cnn, batch 32, {BATCHES} timed train steps; samples/s",
        rows,
    )
    said = ", ".join(f"{where} {ratio:.2f}" for where, ratio in ratios.items())
    return (
        f"## Main-process threads on a CPU: `make bench-threads` ({date.today()})\n\n"
        f"`make bench-threads` (= `python -m bench.threads --rounds {rounds}`), {wall:.0f} s "
        f"wall, {available_cpus()} usable cores. Machine: {report.machine()}.\n\n"
        "Each row is `train.py mode=benchmark benchmark.compute=model` in a fresh process: the "
        "demo train loader (its default worker count) feeding the real train step. The busy "
        "neighbour multiplies matrices on torch's default threads, as a second training "
        f"would.\n\n{table}\n\nMedian ratio auto / default: {said}.\n"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--no-write", action="store_true", help="print only")
    args = parser.parse_args()
    blocks.publish(run(args.rounds), BLOCK, not args.no_write, ROOT / "BENCHMARKS.md")


if __name__ == "__main__":
    main()
