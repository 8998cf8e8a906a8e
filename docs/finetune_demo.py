"""Transfer that works, offline: the fine-tuning docs/walkthrough.md shows (`make docs-outputs
NAMES=finetune`).

A timm resnet10t is pretrained with the template on the demo set (its five shapes, every train
image), and its best.pt is then fine-tuned through `model.pretrained_file` on a task of new
classes, arrows against hexagons (engine_dev.demo_shapes.NEW_CLASSES, drawn as the demo draws
its shapes), from a few images per class (`SHOTS`); val is 90 images per class. Each
fine-tuning setting runs with three seeds (the few images drawn anew with each); the table
gives val/best_acc as the mean and the range, from scratch against fine-tuned, also with
`trainer.freeze_epochs` and `optimizer.layer_decay`.
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

from engine_dev.demo import draw_image
from engine_dev.demo_shapes import NEW_CLASSES

ROOT = Path(__file__).resolve().parents[1]
SHOTS = 8  # train images per class of the new task
VAL = 90  # val images per class of the new task, the same for every seed
SEEDS = (0, 1, 2)
MODEL = ("model=timm", "model.name=resnet10t")
SETTINGS = {  # name -> overrides of the fine-tuning run (the pretrained file added where named)
    "from scratch": (),
    "fine-tuned": ("PRETRAINED",),
    "fine-tuned, freeze_epochs=3": ("PRETRAINED", "trainer.freeze_epochs=3"),
    "fine-tuned, layer_decay=0.6": (
        "PRETRAINED",
        "optimizer=adamw",
        "optimizer.lr=0.003",
        "optimizer.layer_decay=0.6",
    ),
}
FINETUNE = ("trainer.max_epochs=15", "loader.batch_size=8", "loader.num_workers=0")


def new_task(out: Path, shots: int, seed: int) -> Path:
    """An ImageFolder tree under `out` of NEW_CLASSES: `shots` train images per class drawn
    by `seed`, and VAL val images per class drawn alike for every seed."""
    for split, count, draws in (("train", shots, seed), ("val", VAL, 10_000)):
        for label, name in enumerate(NEW_CLASSES):
            rng = np.random.Generator(np.random.PCG64([draws, label]))
            folder = out / split / name
            folder.mkdir(parents=True)
            for i in range(count):
                draw_image(rng, name).save(folder / f"{name}_{i:05d}.jpg", quality=90)
    return out


def train(*overrides: str, run: Path) -> dict[str, float]:
    """metrics.json of `train.py` with `overrides`, in run dir `run`."""
    done = subprocess.run(
        [sys.executable, "train.py", *overrides, f"hydra.run.dir={run}"],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    if done.returncode != 0:
        raise SystemExit(f"train.py {' '.join(overrides)} failed:\n{done.stderr[-3000:]}")
    return json.loads((run / "metrics.json").read_text())


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        scratch = Path(tmp)
        base = train(*MODEL, "trainer.max_epochs=15", run=scratch / "pre")
        best = scratch / "pre" / "checkpoints" / "best.pt"
        print(f"pretrained on the demo's five shapes, 15 epochs: val/acc {base['val/acc']:.4f}")
        rows = []
        for number, (name, overrides) in enumerate(SETTINGS.items()):
            scores = []
            for seed in SEEDS:
                data = new_task(scratch / f"task-{number}-{seed}", SHOTS, seed)
                given = [
                    f"model.pretrained_file={best}" if o == "PRETRAINED" else o for o in overrides
                ]
                knobs = (*MODEL, f"dataset.root={data}", f"trainer.seed={seed}", *FINETUNE)
                run = scratch / f"run-{number}-{seed}"
                scores.append(train(*knobs, *given, run=run)["val/best_acc"])
            rows.append((name, scores))
        seeds = ", ".join(map(str, SEEDS))
        task = f"{' vs '.join(NEW_CLASSES)}, {SHOTS} train images per class"
        print(f"| {task} | val/best_acc, mean [min-max] over seeds {seeds} |")
        print("|---|---|")
        for name, scores in rows:
            print(
                f"| {name} | {statistics.mean(scores):.3f} [{min(scores):.3f}-{max(scores):.3f}] |"
            )


if __name__ == "__main__":
    main()
