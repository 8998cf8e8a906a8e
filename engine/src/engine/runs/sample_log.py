"""trainer.record_samples: samples.csv in the run dir, one row per sample per optimizer step
(`epoch,step,rank,source,index,path`), to answer "which samples were in the batch where the
loss spiked" (engine/docs/scaling.md).

Every rank keeps its rows' numbers in memory until the next checkpoint or epoch end, where
the ranks hand them to rank 0, which names each sample (its source and index there, from the
dataset's `sample_source`; its file, from `get_filename`) and appends them in step order.
Rows of steps a checkpoint does not cover are thus never written by a killed run, and a
resumed run drops any at or past its first new step (engine/runs/step_rows.py), as
TensorBoard drops its points. Off (the default) nothing is tagged, kept or written.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from pathlib import Path

from torch.utils.data import Dataset

from engine.core.csv_cells import escape_cell, own_rows
from engine.runs.step_rows import RowWriter, start_with_rows_before
from engine.training.batches import DeviceBatch
from engine.training.distributed import current_ranks, gather_objects

FILE = "samples.csv"
COLUMNS = ["epoch", "step", "rank", "source", "index", "path"]
NUMBERS = (1, 0, 2, 4)  # the whole-number columns, the step first


class SampleLog:
    """samples.csv of the run dir `out` for the train `dataset`, from optimizer step
    `start_step` on (the earlier rows of a resumed run are kept); rank 0 writes (`write`)."""

    def __init__(self, out: Path, dataset: Dataset, start_step: int, write: bool) -> None:
        self.path, self.dataset, self.start, self.write = out / FILE, dataset, start_step, write
        self.rank = current_ranks().rank
        self.pending: list[tuple[int, int, list[int]]] = []  # (epoch, step, indices) per batch
        if write:
            start_with_rows_before(self.path, [self.path], COLUMNS, start_step, NUMBERS)

    def add(self, epoch: int, step: int, batch: DeviceBatch) -> None:
        """The samples of `batch`, trained on in optimizer step `step` of `epoch`."""
        if batch.ids is None:
            raise ValueError(
                f"trainer.record_samples=true: {type(self.dataset).__name__} yields samples "
                "without their indices; a stream must yield engine.api.Tagged"
                "(sample, index) while its tags_samples is set (or set record_samples=false)."
            )
        self.pending.append((epoch, step, batch.ids.indices))

    def flush(self) -> None:
        """Every rank's rows since the last flush into samples.csv (all ranks call it)."""
        gathered = gather_objects(self.pending)
        self.pending = []
        if not self.write:
            return
        batches = sorted(
            (step, rank, epoch, indices)
            for rank, pending in enumerate(gathered)
            for epoch, step, indices in pending
        )
        named = self.dataset.sample_source  # type: ignore[attr-defined]
        filename = self.dataset.get_filename  # type: ignore[attr-defined]
        with self.path.open("a", encoding="utf-8", errors="surrogateescape", newline="") as f:
            writer = RowWriter(f)
            for step, rank, epoch, indices in batches:
                for i in indices:
                    source, index = named(i)
                    path = escape_cell(filename(i) or "")  # the numbers need no escape
                    writer.writerow((epoch, step, rank, escape_cell(source), index, path))

    def resumed(self, previous: Path) -> None:
        """The training goes on from run dir `previous`: its rows before the start come first."""
        earlier = previous / FILE
        if self.write and earlier.resolve() != self.path.resolve():
            start_with_rows_before(self.path, [earlier, self.path], COLUMNS, self.start, NUMBERS)


def samples_by_step(run: Path) -> dict[int, list[int]]:
    """The run dir `run`'s samples.csv as optimizer step -> the sorted indices it trained on
    (what two runs compare to tell whether their steps held the same samples)."""
    steps: dict[int, list[int]] = defaultdict(list)
    with open(run / FILE, encoding="utf-8", errors="surrogateescape", newline="") as f:
        for row in own_rows(f):
            steps[int(row["step"])].append(int(row["index"]))
    return {step: sorted(indices) for step, indices in steps.items()}


def uses_by_epoch(run: Path) -> dict[int, Counter]:
    """The run dir `run`'s samples.csv as epoch -> how often each index was trained on."""
    counts: dict[int, Counter] = defaultdict(Counter)
    with open(run / FILE, encoding="utf-8", errors="surrogateescape", newline="") as f:
        for row in own_rows(f):
            counts[int(row["epoch"])][int(row["index"])] += 1
    return counts
