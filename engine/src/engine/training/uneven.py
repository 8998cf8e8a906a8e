"""Ranks with different numbers of batches (streams are split by shard, so they rarely match).

DDP needs every rank in every gradient all-reduce. During the epoch, DDP's Join context lets a
rank that ran out shadow the all-reduces of the others; after it, every rank continues from the
rank that ran the most batches (weights, optimizer and schedule state, step count), so the
ranks stay identical, as DDP assumes.
"""

from __future__ import annotations

import contextlib
from typing import Any

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader, IterableDataset

from engine.training.distributed import broadcast_module


class UnevenRanks:
    """Active for a DDP model fed by a stream; a no-op otherwise (map-style orders are padded
    to equal lengths per rank, see engine/data/sharding.py)."""

    def __init__(self, model: torch.nn.Module, loader: DataLoader) -> None:
        self.model = model
        self.active = isinstance(model, DistributedDataParallel) and isinstance(
            loader.dataset, IterableDataset
        )

    def joined(self) -> contextlib.AbstractContextManager:
        """Wrap the epoch's batch loop: ranks that finish early shadow the others' all-reduces."""
        if not self.active:
            return contextlib.nullcontext()
        return self.model.join()  # type: ignore[operator]

    def align(
        self,
        optimizer: torch.optim.Optimizer,
        scheduler: torch.optim.lr_scheduler.LRScheduler,
        scaler: torch.amp.GradScaler | None,
        step: int,
        batches: int,
    ) -> int:
        """After the epoch, give every rank the state of the rank that ran the most `batches`
        (the highest such rank); returns its optimizer step count."""
        if not self.active:
            return step
        counts = torch.zeros(dist.get_world_size(), dtype=torch.long)
        counts[dist.get_rank()] = batches
        dist.all_reduce(counts)
        if int(counts.min()) == int(counts.max()):
            return step
        src = int((counts == counts.max()).nonzero().max())
        broadcast_module(self.model, src, parameters=True)
        mine = dist.get_rank() == src
        state: list[Any] = [
            _to_cpu(optimizer.state_dict()) if mine else None,
            scheduler.state_dict() if mine else None,
            scaler.state_dict() if mine and scaler is not None else None,
            step,
        ]
        dist.broadcast_object_list(state, src)
        optimizer.load_state_dict(state[0])
        scheduler.load_state_dict(state[1])
        if scaler is not None:
            scaler.load_state_dict(state[2])
        return state[3]


def _to_cpu(tree: Any) -> Any:
    """`tree` with every tensor moved to the CPU (pickled state then loads on any rank)."""
    if isinstance(tree, torch.Tensor):
        return tree.cpu()
    if isinstance(tree, dict):
        return {key: _to_cpu(value) for key, value in tree.items()}
    if isinstance(tree, (list, tuple)):
        return type(tree)(_to_cpu(value) for value in tree)
    return tree
