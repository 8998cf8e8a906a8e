"""`make bench-compile`: `trainer.compile=default` against eager on this machine, side by side,
for the default model (small_cnn, 48 px) and ResNet-18 (torchvision's, 64 px crops).

Each measurement is a fresh `train.py` training on the demo images (2 epochs of
`trainer.limit_train_batches` batches of 32), compiled (each with an empty inductor cache:
cold) and eager alternating, the order swapped every round. Per row: the step
(pipeline/step_ms: forward, backward and optimizer step, the compile itself left out, as the
run logs it apart), the compile's seconds from its log line,
and then, of the compiled run's best.pt, whether any key carries torch.compile's `_orig_mod.`
and `mode=eval` of it. The ratio is the median of the per-round ratios of the step (eager /
compiled: above 1, compiling paid).

    python -m bench.compile [--rounds 3] [--no-write]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import date
from pathlib import Path

import torch

from bench import blocks, report
from bench.timing import spread

ROOT = Path(__file__).resolve().parents[1]
BLOCK = "make bench-compile"
MODELS = {
    "small_cnn, 48 px (the default)": [],
    "resnet18 (torchvision), 64 px": [
        "model=resnet18",
        "transforms=imagenet",
        "transforms.train.0.size=64",
        "transforms.val.0.size=72",
        "transforms.val.1.size=64",
    ],
}
RUN = ["trainer.max_epochs=2", "trainer.limit_train_batches=20", "trainer.limit_val_batches=2"]
COMPILED = re.compile(r"torch\.compile \(trainer\.compile=default\): ([\d.]+) s")


def training(overrides: list[str], run: Path) -> tuple[float, float | None]:
    """(pipeline/step_ms, the compile's seconds or None) of one training into `run`, with an
    empty inductor cache of its own: the compile a new machine or changed code pays (with the
    cache warm, /tmp/torchinductor_<user>, the same compile took ~2 s here)."""
    env = os.environ | {"TORCHINDUCTOR_CACHE_DIR": str(run.parent / f"{run.name}-inductor")}
    done = subprocess.run(
        [sys.executable, "train.py", *RUN, *overrides, f"hydra.run.dir={run}"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env=env,
    )
    if done.returncode != 0:
        raise SystemExit(f"train.py {' '.join(overrides)} failed:\n{done.stderr[-3000:]}")
    compiled = COMPILED.search(done.stdout + done.stderr)
    step = json.loads((run / "metrics.json").read_text())["pipeline/step_ms"]
    return step, float(compiled[1]) if compiled else None


def checkpoint_facts(run: Path) -> str:
    """Of a compiled run's best.pt: its keys, and what mode=eval of it says."""
    state = torch.load(run / "checkpoints" / "best.pt", weights_only=True)
    compiled_keys = sum("_orig_mod" in key for key in state["model"])
    done = subprocess.run(
        [
            sys.executable,
            "train.py",
            "mode=eval",
            f"eval.checkpoint={run}",
            f"hydra.run.dir={run}-eval",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    said = re.search(r"eval val: (val/loss [\d.]+, val/acc [\d.]+)", done.stdout + done.stderr)
    return f"{len(state['model'])} keys, {compiled_keys} with `_orig_mod.`; mode=eval: " + (
        said[1] if done.returncode == 0 and said else f"failed ({done.stderr[-200:]})"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--no-write", action="store_true", help="print only")
    args = parser.parse_args()
    start = time.perf_counter()
    lines = [
        "| model | eager step, ms | compiled step, ms | eager / compiled | compile, s | the compiled run's best.pt |",
        "|---|---|---|---|---|---|",
    ]
    with tempfile.TemporaryDirectory() as tmp:
        for name, overrides in MODELS.items():
            eager, compiled, seconds = [], [], []
            for i in range(args.rounds):
                print(f"{name}: round {i + 1}/{args.rounds}", file=sys.stderr, flush=True)
                order = [False, True] if i % 2 == 0 else [True, False]
                for on in order:
                    run = Path(tmp) / f"{len(lines)}-{i}-{on}"
                    step, took = training(
                        [*overrides, *(["trainer.compile=default"] if on else [])], run
                    )
                    (compiled if on else eager).append(step)
                    if on:
                        seconds.append(took or 0.0)
                        last = run
            ratio = statistics.median(e / c for e, c in zip(eager, compiled, strict=True))
            lines.append(
                f"| {name} | {spread(eager)} | {spread(compiled)} | {ratio:.2f}x | "
                f"{spread(seconds)} | {checkpoint_facts(last)} |"
            )
    text = "\n\n".join(
        [
            f"## torch.compile against eager on this CPU: `make bench-compile` ({date.today()})",
            f"`python -m bench.compile --rounds {args.rounds}`, {time.perf_counter() - start:.0f} s "
            f"wall. Machine: {report.machine()}. Each training: {' '.join(RUN)}, batch 32, the "
            "demo images; step = pipeline/step_ms (the compile left out: it is logged on its "
            "own line, the compile column); cells are median [min-max] over the rounds, the "
            "ratio the median of per-round ratios.",
            "\n".join(lines),
        ]
    )
    blocks.publish(text, BLOCK, not args.no_write)


if __name__ == "__main__":
    main()
