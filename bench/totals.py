"""`make bench-totals`: the engine's pass totals (engine/training/totals.py: the loss and each
metric's sums on the device) against torchmetrics (MeanMetric for the loss, the metric's own
class), the try the engine's choice rests on. Per batch of a train pass: the update, in one
process on the CPU, rows alternating engine / torchmetrics and the order swapped every round;
ratios are medians of the per-round ratios (torchmetrics / engine).

    python -m bench.totals [--rounds 5] [--no-write]
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from datetime import date
from pathlib import Path

import torch
from torchmetrics import MeanMetric
from torchmetrics.classification import MulticlassAccuracy

from bench import blocks, report
from engine.training.totals import PassTotals
from src.metrics.accuracy import Accuracy

ROOT = Path(__file__).resolve().parents[1]
BLOCK = "make bench-totals"
BATCH, CLASSES, BATCHES = 32, 10, 2000  # a batch of the demo's size, updates timed per row


def _batches() -> list[tuple[torch.Tensor, torch.Tensor, torch.Tensor]]:
    torch.manual_seed(0)
    return [
        (torch.rand(()), torch.randn(BATCH, CLASSES), torch.randint(CLASSES, (BATCH,)))
        for _ in range(64)
    ]


def engine_pass(batches: list) -> float:
    totals = PassTotals(torch.device("cpu"), {"acc": Accuracy()})
    for i in range(BATCHES):
        totals.add(*batches[i % len(batches)])
    return totals.means("train", "")["train/acc"]


def torchmetrics_pass(batches: list) -> float:
    loss, acc = MeanMetric(), MulticlassAccuracy(CLASSES, average="micro")
    for i in range(BATCHES):
        mean_loss, logits, labels = batches[i % len(batches)]
        loss.update(mean_loss, weight=len(labels))
        acc.update(logits, labels)
    loss.compute()
    return float(acc.compute())


def _us_per_batch(run: Callable[[list], float], batches: list) -> tuple[float, float]:
    start = time.perf_counter()
    value = run(batches)
    return (time.perf_counter() - start) / BATCHES * 1e6, value


def run(rounds: int) -> str:
    torch.set_num_threads(1)
    batches, times = _batches(), {"engine": [], "torchmetrics": []}
    runs = {"engine": engine_pass, "torchmetrics": torchmetrics_pass}
    values = {}
    for r in range(rounds):
        for name in list(runs) if r % 2 == 0 else list(reversed(runs)):
            spent, values[name] = _us_per_batch(runs[name], batches)
            times[name].append(spent)
    if abs(values["engine"] - values["torchmetrics"]) > 1e-6:
        raise RuntimeError(f"the two accuracies differ: {values}")
    paired = [t / e for t, e in zip(times["torchmetrics"], times["engine"], strict=True)]
    table = report.value_table(
        f"batch {BATCH}, {CLASSES} classes, {BATCHES} updates per row; µs per batch",
        [
            ("engine PassTotals (loss + Accuracy)", times["engine"]),
            ("torchmetrics (MeanMetric + MulticlassAccuracy)", times["torchmetrics"]),
            ("torchmetrics / engine", paired),
        ],
    )
    return (
        f"## Pass totals against torchmetrics: `make bench-totals` ({date.today()})\n\n"
        f"`make bench-totals` (= `python -m bench.totals --rounds {rounds}`), one CPU thread. "
        f"Machine: {report.machine()}. Both give the same accuracy ({values['engine']:.4f}).\n\n"
        f"{table}\n\nMedian ratio torchmetrics / engine: {statistics.median(paired):.2f}.\n"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--no-write", action="store_true", help="print only")
    args = parser.parse_args()
    blocks.publish(run(args.rounds), BLOCK, not args.no_write, ROOT / "BENCHMARKS.md")


if __name__ == "__main__":
    main()
