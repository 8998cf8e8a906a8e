"""Transfer that works, offline: the fine-tuning docs/walkthrough.md shows (`make docs-outputs
NAMES=finetune`).

On the demo shapes, split by class into two tasks: a timm resnet10t is pretrained with the
template on circles, squares and triangles (every train image), and its best.pt is then
fine-tuned through `model.pretrained_file` on the other task, crosses against stars, from a
few images per class (`SHOTS`); val is every val image of those two classes. Each fine-tuning
setting runs with three seeds (the few images drawn anew with each); the table gives val/acc
(the best epoch's) as the mean and the range, from scratch against fine-tuned, also with
`trainer.freeze_epochs` and `optimizer.layer_decay`.
"""

from __future__ import annotations

import json
import random
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DEMO = ROOT / "data" / "demo" / "imagefolder"
PRETRAIN, TARGET = ("circle", "square", "triangle"), ("cross", "star")
SHOTS = 8  # train images per class of the target task
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


def link_tree(out: Path, classes: tuple[str, ...], shots: int | None, seed: int) -> Path:
    """An ImageFolder tree under `out` of symlinks to the demo's `classes`: every val image,
    and `shots` train images per class (None: all), drawn by `seed`."""
    for split in ("train", "val"):
        for name in classes:
            files = sorted((DEMO / split / name).iterdir())
            if split == "train" and shots is not None:
                files = random.Random(f"{seed}/{name}").sample(files, shots)
            (out / split / name).mkdir(parents=True)
            for file in files:
                (out / split / name / file.name).symlink_to(file)
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
        pre = link_tree(scratch / "pretrain", PRETRAIN, None, 0)
        base = train(*MODEL, f"dataset.root={pre}", "trainer.max_epochs=6", run=scratch / "pre")
        best = scratch / "pre" / "checkpoints" / "best.pt"
        print(f"pretrained on {', '.join(PRETRAIN)}: val/acc {base['val/acc']:.4f}")
        rows = []
        for number, (name, overrides) in enumerate(SETTINGS.items()):
            scores = []
            for seed in SEEDS:
                data = link_tree(scratch / f"target-{number}-{seed}", TARGET, SHOTS, seed)
                given = [
                    f"model.pretrained_file={best}" if o == "PRETRAINED" else o for o in overrides
                ]
                knobs = (*MODEL, f"dataset.root={data}", f"trainer.seed={seed}", *FINETUNE)
                run = scratch / f"run-{number}-{seed}"
                scores.append(train(*knobs, *given, run=run)["val/best_acc"])
            rows.append((name, scores))
        print(
            f"| {' vs '.join(TARGET)}, {SHOTS} train images per class | val/best_acc, mean [min-max] over seeds {', '.join(map(str, SEEDS))} |"
        )
        print("|---|---|")
        for name, scores in rows:
            print(
                f"| {name} | {statistics.mean(scores):.3f} [{min(scores):.3f}-{max(scores):.3f}] |"
            )


if __name__ == "__main__":
    main()
