"""`make bench-sampling` (also a section of `make bench`): what `dataset=mix`,
`trainer.record_samples=true` and the per-stage timings (`trainer.pipeline_timing`, on by
default, so the plain row has them and a row turns them off) cost against the plain loader,
in the real training loop.

Each measurement is a fresh `train.py` training of one epoch on the demo data (its 1900 train
images; the mix draws its two demo sources, the image folders and the CSV listing of the
same files, 0.75 / 0.25, 3800 samples an epoch), with the default model and with a light one
(model=mlp: the loader's and the loop's own costs show); rows alternate, order rotated every
round. train/samples_per_s is the epoch's own rate; wall_s adds start-up, validation and the
checkpoint (where samples.csv is written). Ratios are medians of per-round ratios.

The timings' own cost shows best without a model: the train loader alone (`mode=benchmark
benchmark.compute=none benchmark.batches=100`, its loader/samples_per_s, the median of 3
windows), with the timings on and off, alternating, in three times as many rounds: a run is
short, and three rounds left the ratio inside the noise (0.958x over 3 rounds, 1.023x over 8).

    python -m bench.sampling [--rounds 3] [--no-write]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import date
from pathlib import Path

from bench import blocks, report
from bench.timing import spread

ROOT = Path(__file__).resolve().parents[1]
BLOCK = "make bench-sampling"
ROWS = {
    "plain loader (dataset=imagefolder)": [],
    "trainer.pipeline_timing=false": ["trainer.pipeline_timing=false"],
    "trainer.record_samples=true": ["trainer.record_samples=true"],
    "dataset=mix (2 sources, 0.75 / 0.25)": ["dataset=mix"],
}
MODELS = {"default model (small_cnn)": [], "light model (mlp)": ["model=mlp"]}
LOADER = ["mode=benchmark", "benchmark.compute=none", "benchmark.batches=100"]
LOADER_ROWS = {
    "train loader, timings on (the default)": [],
    "train loader, trainer.pipeline_timing=false": ["trainer.pipeline_timing=false"],
}


def run_metrics(overrides: list[str]) -> dict[str, float]:
    """metrics.json of one `train.py` run with `overrides`, in a throwaway run dir."""
    with tempfile.TemporaryDirectory() as run:
        command = [sys.executable, "train.py", "logger=csv", f"hydra.run.dir={run}", *overrides]
        done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            raise RuntimeError(f"{' '.join(command)} failed:\n{done.stderr[-3000:]}")
        return json.loads((Path(run) / "metrics.json").read_text())


def measure(overrides: list[str]) -> tuple[float, float]:
    """(train/samples_per_s, wall_s) of one epoch of `train.py` with `overrides`."""
    metrics = run_metrics(["trainer.max_epochs=1", *overrides])
    return metrics["train/samples_per_s"], metrics["wall_s"]


def loader_table(rounds: int, say) -> str:
    """The train loader alone with the timings on and off, in `rounds` alternating rounds."""
    names = list(LOADER_ROWS)
    rates: dict[str, list[float]] = {n: [] for n in names}
    for r in range(rounds):
        for name in names[r % 2 :] + names[: r % 2]:
            rates[name].append(run_metrics([*LOADER, *LOADER_ROWS[name]])["loader/samples_per_s"])
            say(f"  loader alone, round {r + 1}: {name}: {rates[name][-1]:.1f} samples/s")
    on, off = rates[names[0]], rates[names[1]]
    ratio = statistics.median(a / b for a, b in zip(on, off, strict=True))
    return "\n".join(
        [
            "**the train loader alone (mode=benchmark, no model)**",
            "",
            "| row | loader samples/s |",
            "|---|---|",
            *(f"| {name} | {spread(rates[name])} |" for name in names),
            "",
            f"Timings on / off: {ratio:.3f}x (median of per-round ratios; below 1 = their cost).",
        ]
    )


def table(model: str, extra: list[str], rounds: int, say) -> str:
    """One model's rows, measured in `rounds` interleaved rounds."""
    names = list(ROWS)
    rates: dict[str, list[float]] = {n: [] for n in names}
    walls: dict[str, list[float]] = {n: [] for n in names}
    for r in range(rounds):
        for name in names[r % len(names) :] + names[: r % len(names)]:
            rate, wall = measure([*extra, *ROWS[name]])
            rates[name].append(rate)
            walls[name].append(wall)
            say(f"  {model}, round {r + 1}: {name}: {rate:.1f} samples/s, {wall:.1f} s")
    base = names[0]
    lines = [
        f"**{model}**",
        "",
        "| row | train samples/s | x plain | wall_s |",
        "|---|---|---|---|",
    ]
    for name in names:
        ratio = statistics.median(a / b for a, b in zip(rates[name], rates[base], strict=True))
        lines.append(f"| {name} | {spread(rates[name])} | {ratio:.3f}x | {spread(walls[name])} |")
    return "\n".join(lines)


def section(rounds: int, say) -> str:
    """The block's text: both models' tables."""
    start = time.perf_counter()
    tables = [table(model, extra, rounds, say) for model, extra in MODELS.items()]
    tables.append(loader_table(3 * rounds, say))
    wall = time.perf_counter() - start
    return "\n\n".join(
        [
            f"## dataset=mix, trainer.record_samples and trainer.pipeline_timing against the "
            f"plain loader: "
            f"`make bench-sampling` ({date.today().isoformat()})",
            f"`make bench-sampling` (= `python -m bench.sampling --rounds {rounds}`; also part "
            f"of `make bench`), {wall:.0f} s wall. Machine: {report.machine()}.",
            *(part.replace("\n", " ") for part in __doc__.split("\n\n")[1:3]),
            *tables,
        ]
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--no-write", action="store_true", help="print only, leave BENCHMARKS.md")
    args = parser.parse_args()
    text = section(args.rounds, lambda line: print(line, file=sys.stderr, flush=True))
    blocks.publish(text, BLOCK, write=not args.no_write)


if __name__ == "__main__":
    main()
