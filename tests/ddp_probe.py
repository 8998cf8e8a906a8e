"""Run by tests/test_distributed.py in 2 spawned gloo processes: one epoch in which the ranks
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
