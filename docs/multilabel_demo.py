"""The multi-label training the engine manual's datasets.md shows
(`make docs-outputs NAMES=multilabel`).

Trains `experiment=multilabel_csv` on the demo's multi-label set (data/demo/multilabel) with
logger=csv, then prints the run's start-up line, the last epochs' val/map, val/f1 and
val/subset_acc (from metrics.csv) and the best val/map (metrics.json).
"""

from __future__ import annotations

import csv
import json
import subprocess
import sys
import tempfile
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RUN = ["experiment=multilabel_csv", "logger=csv"]  # metrics.csv: every epoch's values
KEYS = ("val/map", "val/f1", "val/subset_acc")
SHOWN = 3  # last epochs printed


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        run = Path(tmp) / "run"
        done = subprocess.run(
            [sys.executable, "train.py", *RUN, f"hydra.run.dir={run}"],
            cwd=ROOT,
            capture_output=True,
            text=True,
        )
        if done.returncode:
            raise SystemExit(f"training failed:\n{(done.stdout + done.stderr)[-3000:]}")
        for line in (done.stdout + done.stderr).splitlines():
            if "[engine.training.assemble]" in line:
                print(line.split("] - ", 1)[-1])
        values: dict[str, list[float]] = defaultdict(list)  # one per epoch, in order
        with (run / "metrics.csv").open(newline="", encoding="utf-8") as f:
            for row in csv.DictReader(f):
                if row["key"] in KEYS:
                    values[row["key"]].append(float(row["value"]))
        epochs = len(values[KEYS[0]])
        for epoch in range(max(0, epochs - SHOWN), epochs):
            shown = "  ".join(f"{k} {values[k][epoch]:.4f}" for k in KEYS)
            print(f"epoch {epoch + 1}/{epochs}  {shown}")
        metrics = json.loads((run / "metrics.json").read_text())
        print(f"best val/map {metrics['val/best_map']:.4f} in {metrics['wall_s']:.0f} s")


if __name__ == "__main__":
    main()
