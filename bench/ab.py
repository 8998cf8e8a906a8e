"""`make bench-ab REF=<commit>`: this checkout against another commit of the template, side by
side in one run: the same `train.py mode=benchmark` command lines alternating between the two
checkouts (order swapped every round), on the data `make bench` writes, with the same
interpreter and packages. Each cell is a median [min-max] over the rounds; the ratio is the
median of the per-round ratios (this / the other), so the host's drift cancels out.

    python -m bench.ab [--against 7a3aeb6] [--rounds 5] [--no-write] [--guard 0.95]

Without --against, the other commit is the engine's last release: the newest commit that set
its `__version__`. The other commit is checked out into a temporary git worktree, removed at
the end.

`--guard 0.95` (`make bench-guard`) is what a change to decode, transforms, collate or the
loader runs before it lands: when this checkout's hot path (HOT_PATH) differs from the other
commit's, every row must keep 0.95x or better, or the command fails naming the rows; when it
does not differ, nothing is measured. A benchmark, not a timed test: the 0.4 ms per image
that the JPEG scan check added (issue 52) passed every test and cost the train path a
quarter of its speed, and no table showed it because none was rerun.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import date
from pathlib import Path

from bench import blocks, report
from bench.images import write_image_folder
from bench.tensors import write_tensors
from bench.timing import spread

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "data" / "bench"
BLOCK = "make bench-ab"
VERSION_FILE = "engine/src/engine/__init__.py"
# What every sample or batch passes through: a change here runs the guard before it lands.
HOT_PATH = (
    "engine/src/engine/data",  # reading, decoding, transforms, collate, loaders, datasets
    "engine/src/engine/measure/stages.py",  # the per-sample stage timings
    "engine/src/engine/training",  # the loop's edges: device moves, timings, the step
    "conf/transforms",
    "conf/loader",
    "src/step.py",
    "src/loop.py",
)
JPEG = ("dataset=imagefolder", "transforms=imagenet", "loader.num_workers=2")
CASES = {  # row -> overrides of `train.py mode=benchmark` (paths filled in by `cases`)
    "500x375 JPEG, train, uint8 batches (compute=none)": (
        *JPEG,
        "loader.batch_size=64",
        "benchmark.compute=none",
    ),
    "500x375 JPEG, train, model-ready float (compute=normalize)": (
        *JPEG,
        "loader.batch_size=64",
        "benchmark.compute=normalize",
    ),
    "in-memory tensors 3x32x32, batch 256 (dataset=tensor)": (
        "dataset=tensor",
        "dataset.val_path=null",
        "dataset.val_fraction=0.1",
        "transforms=none",
        "loader.batch_size=256",
        "benchmark.compute=none",
        # 1000 batches: a window of ~0.1 s (150 made one of 13 ms, where one ms of jitter
        # moved a round by 8%: the row read 0.86x against 8c1f312, then 0.98x over 1500 batches)
        "benchmark.batches=1000",
        "benchmark.warmup=20",
    ),
    "ResNet-18 train step, 64 px crops, SGD (compute=model)": (
        *JPEG,
        "model=resnet18",
        "optimizer=sgd",
        "transforms.train.0.size=64",
        "loader.batch_size=64",
        "benchmark.compute=model",
        "benchmark.batches=8",
        "benchmark.warmup=2",
    ),
}


def cases() -> dict[str, tuple[str, ...]]:
    """The rows, on the data `make bench` writes (made here when missing)."""
    jpegs = write_image_folder(DATA / "jpeg500x375", 1024, (500, 375), seed=0)
    tensors = write_tensors(DATA / "tensors.pt", 50_000, seed=0)
    data = {"imagefolder": f"dataset.root={jpegs}", "tensor": f"dataset.path={tensors}"}
    return {
        name: (*overrides, data["tensor" if "dataset=tensor" in overrides else "imagefolder"])
        for name, overrides in CASES.items()
    }


def samples_per_s(checkout: Path, overrides: tuple[str, ...]) -> float:
    """loader/samples_per_s of `train.py mode=benchmark` in `checkout` (its own conf/)."""
    env = {k: v for k, v in os.environ.items() if k != "PROJECT_ROOT"}  # each finds its own
    # Its own engine too: since the engine moved to engine/src/ (an installed, editable
    # package), `import engine` in another checkout found this one's, so both columns ran the
    # same engine. Before the move the engine sat beside train.py and was found first anyway.
    engine_src = checkout / "engine" / "src"
    if checkout != ROOT and engine_src.is_dir():
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(engine_src), env.get("PYTHONPATH")]))
    with tempfile.TemporaryDirectory() as run:
        done = subprocess.run(
            [sys.executable, "train.py", "mode=benchmark", *overrides, f"hydra.run.dir={run}"],
            cwd=checkout,
            env=env,
            capture_output=True,
            text=True,
            check=False,
        )
        if done.returncode != 0:
            raise RuntimeError(f"{checkout}: train.py {' '.join(overrides)}\n{done.stderr[-3000:]}")
        return json.loads((Path(run) / "metrics.json").read_text())["loader/samples_per_s"]


def measure(other: Path, rounds: int) -> list[tuple[str, list[float], list[float]]]:
    """Per row: samples/s here and in `other`, one value per round, alternating who goes first."""
    rows = []
    for name, overrides in cases().items():
        here, there = [], []
        for i in range(rounds):
            print(f"{name}: round {i + 1}/{rounds}", file=sys.stderr, flush=True)
            order = [(ROOT, here), (other, there)]
            for checkout, into in order if i % 2 == 0 else reversed(order):
                into.append(samples_per_s(checkout, overrides))
        rows.append((name, here, there))
    return rows


def ratio_of(here: list[float], there: list[float]) -> float:
    """The median of the per-round ratios (this / the other): the host's drift cancels out."""
    return statistics.median(h / t for h, t in zip(here, there, strict=True))


def table(rows: list[tuple[str, list[float], list[float]]], ref: str) -> str:
    lines = [
        f"| mode=benchmark row | this checkout, samples/s | {ref}, samples/s | this / {ref} |",
        "|---|---|---|---|",
    ]
    for name, here, there in rows:
        ratio = ratio_of(here, there)
        lines.append(f"| {name} | {spread(here)} | {spread(there)} | {ratio:.2f}x |")
    return "\n".join(lines)


def git(*args: str) -> str:
    """What `git args` prints in this checkout, stripped; a failure raises naming the command."""
    return subprocess.run(
        ["git", *args], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.strip()


def last_release() -> str:
    """The newest commit that set the engine's `__version__`: the release a change is held to."""
    found = git("log", "-1", "--format=%h", "-G", "^__version__ = ", "--", VERSION_FILE)
    if not found:
        raise SystemExit(f"no commit sets __version__ in {VERSION_FILE}: give --against REF")
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--against", help="the commit to compare with (default: last release)")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--no-write", action="store_true", help="print only")
    parser.add_argument(
        "--guard", type=float, metavar="RATIO", help="fail when a row falls under RATIO"
    )
    args = parser.parse_args()
    args.against = args.against or last_release()
    head = git("rev-parse", "--short", "HEAD")
    if args.guard is not None:
        changed = git("diff", "--name-only", args.against, "--", *HOT_PATH).splitlines()
        if not changed:
            print(f"The hot path is as at {args.against}: nothing to measure.")
            return
        print(f"The hot path differs from {args.against} in: {', '.join(changed)}", flush=True)
    start = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        other = Path(tmp) / "other"
        subprocess.run(
            ["git", "worktree", "add", "--detach", "-q", str(other), args.against],
            cwd=ROOT,
            check=True,
        )
        try:
            rows = measure(other, args.rounds)
        finally:
            subprocess.run(["git", "worktree", "remove", "--force", str(other)], cwd=ROOT)
    text = "\n\n".join(
        [
            f"## This checkout against another commit: `make bench-ab` ({date.today()})",
            f"`python -m bench.ab --against {args.against} --rounds {args.rounds}` (this "
            f"checkout: {head}), {time.perf_counter() - start:.0f} s wall. Machine: "
            f"{report.machine()}. Each cell: median [min-max] of `loader/samples_per_s` over "
            "the rounds, the two checkouts alternating (who goes first swapped each round); "
            "the ratio is the median of the per-round ratios.",
            table(rows, args.against),
        ]
    )
    print(text)
    if not args.no_write:
        blocks.write_block(ROOT / "BENCHMARKS.md", text, BLOCK)
    ratios = {name: ratio_of(here, there) for name, here, there in rows}
    slower = [f"{n}: {r:.2f}x" for n, r in ratios.items() if args.guard and r < args.guard]
    if slower:
        raise SystemExit(
            f"Slower than {args.against} past the guard's {args.guard}x: {'; '.join(slower)}. "
            "Find the cost on one thread (BENCHMARKS.md says how) before this lands."
        )


if __name__ == "__main__":
    main()
