"""Run by tests/process/test_distributed.py in 2 spawned gloo processes: one epoch in which the ranks
get different numbers of batches (as streams do), then `UnevenRanks.align`; each rank saves
what it ends with, so the test can check that the ranks agree."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import torch
import torch.distributed as dist
from torch import nn
from torch.utils.data import DataLoader, IterableDataset

from engine.training.distributed import DataParallelModel
from engine.training.uneven import UnevenRanks

BATCHES = (5, 2)  # per rank
BATCH = 4


class Stream(IterableDataset):
    """`n` random (features, label) samples, different on every rank."""

    def __init__(self, n: int, seed: int) -> None:
        self.n, self.seed = n, seed

    def __iter__(self) -> Iterator[tuple[torch.Tensor, int]]:
        rng = torch.Generator().manual_seed(self.seed)
        for _ in range(self.n):
            yield torch.randn(4, generator=rng), int(torch.randint(2, (), generator=rng))


def uneven_epoch(rank: int, world_size: int, init_file: str, out_dir: str) -> None:
    dist.init_process_group(
        "gloo", init_method=f"file://{init_file}", rank=rank, world_size=world_size
    )
    torch.manual_seed(rank)  # different initial weights: DDP starts every rank from rank 0's
    net = nn.Sequential(nn.Linear(4, 8), nn.BatchNorm1d(8), nn.ReLU(), nn.Linear(8, 2))
    model = DataParallelModel(net)
    optimizer = torch.optim.Adam(model.parameters(), lr=0.05)
    scheduler = torch.optim.lr_scheduler.LinearLR(optimizer, 1.0, 0.1, total_iters=10)
    loader = DataLoader(Stream(BATCHES[rank] * BATCH, seed=rank), batch_size=BATCH)
    uneven = UnevenRanks(model, loader)
    step = batches = 0
    with uneven.joined():
        for inputs, labels in loader:
            nn.functional.cross_entropy(model(inputs), labels).backward()
            optimizer.step()
            optimizer.zero_grad()
            scheduler.step()
            step, batches = step + 1, batches + 1
    own_step = step
    step = uneven.align(optimizer, scheduler, None, step, batches)
    torch.save(
        {
            "active": uneven.active,
            "own_step": own_step,
            "step": step,
            "model": model.state_dict(),
            "optimizer": optimizer.state_dict()["state"],
            "lr": scheduler.get_last_lr(),
        },
        Path(out_dir) / f"rank{rank}.pt",
    )
    # both ranks done with every collective before either tears down: a rank that destroyed
    # its group while the other still used the pair aborted it (SIGABRT from gloo, seen twice)
    dist.barrier()
    dist.destroy_process_group()


GATHERED_ROWS = (7, 0, 5)  # per rank: rank 1 evaluates no sample at all


def pass_rows(rank: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Rank `rank`'s logits and multi-hot labels (4 classes), seeded by the rank."""
    rng = torch.Generator().manual_seed(100 + rank)
    n = GATHERED_ROWS[rank]
    return torch.randn(n, 4, generator=rng), (torch.rand(n, 4, generator=rng) < 0.5).float()


def gathered_pass(rank: int, world_size: int, init_file: str, out_dir: str) -> None:
    """A pass's totals with gathered (average precision) and summed metrics, reduced over
    ranks that hold different numbers of rows; each rank saves the means it computes."""
    from engine.training.distributed import reduce_totals
    from engine.training.totals import PassTotals
    from src.metrics.multilabel import F1, MeanAveragePrecision

    dist.init_process_group(
        "gloo", init_method=f"file://{init_file}", rank=rank, world_size=world_size
    )
    totals = PassTotals(torch.device("cpu"), {"map": MeanAveragePrecision(), "f1": F1(0.5)})
    logits, labels = pass_rows(rank)
    if len(logits):
        totals.add(torch.tensor(0.5), logits, labels)
    reduce_totals(totals)
    torch.save(totals.means("val", ""), Path(out_dir) / f"gathered{rank}.pt")
    dist.barrier()
    dist.destroy_process_group()
