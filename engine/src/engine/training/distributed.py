"""Data parallelism over processes started by torchrun (or by SLURM through submitit): the
process group, each rank's place and device, the DDP model, and the loop's few collectives.

In a single process every function here is a no-op, so the code paths are the same.
"""

from __future__ import annotations

import contextlib
import os
import secrets
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader

from engine.core.launch import share_launch
from engine.core.seeding import derive_seed
from engine.data.batch_stages import Loader
from engine.training.totals import PassTotals


@dataclass(frozen=True)
class Ranks:
    """This process's place in the job: global rank, number of processes, rank on its node."""

    rank: int = 0
    world_size: int = 1
    local_rank: int = 0

    @property
    def is_main(self) -> bool:
        """Rank 0: the one that logs, writes TensorBoard, checkpoints and metrics.json."""
        return self.rank == 0


def current_ranks() -> Ranks:
    """The place of this process (rank 0 of 1 outside a process group)."""
    if not dist.is_initialized():
        return Ranks()
    local = int(os.environ.get("LOCAL_RANK", "0"))
    return Ranks(dist.get_rank(), dist.get_world_size(), local)


def init_distributed() -> Ranks:
    """Join the job's process group when the launcher started several processes (idempotent):
    torchrun's env:// variables, or a submitit job's tasks exported as such. gloo carries CPU
    tensors, NCCL CUDA ones."""
    if dist.is_initialized():
        return current_ranks()
    if "WORLD_SIZE" not in os.environ and "SUBMITIT_EXECUTOR" in os.environ:
        import submitit  # hydra-submitit-launcher job: one task per GPU becomes one rank

        if submitit.JobEnvironment().num_tasks > 1:
            helper = submitit.helpers.TorchDistributedEnvironment()
            helper.export(set_cuda_visible_devices=False)
            if "OMP_NUM_THREADS" not in os.environ:  # torchrun's default: ranks share the cores
                torch.set_num_threads(1)
    if int(os.environ.get("WORLD_SIZE", "1")) <= 1:
        return Ranks()
    if torch.cuda.is_available():
        torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")))
    dist.init_process_group("cpu:gloo,cuda:nccl" if torch.cuda.is_available() else "gloo")
    return current_ranks()


@contextlib.contextmanager
def distributed_job() -> Iterator[Ranks]:
    """train.py's frame: join the process group before Hydra names the run dir, give every rank
    rank 0's launch time and run id (so the job has one output dir), leave the group at exit."""
    ranks = init_distributed()
    if ranks.world_size > 1:
        stamp = [datetime.now(), secrets.token_hex(3)]
        dist.broadcast_object_list(stamp, src=0)
        share_launch(*stamp)
    try:
        yield ranks
    finally:
        if dist.is_initialized():
            dist.destroy_process_group()


def rank_seed(seed: int, rank: int, *parts: int) -> int:
    """The global generators' seed of `rank`: `seed` on rank 0 (a single process's streams),
    one derived from (seed, rank, parts) elsewhere, so dropout and the like differ between
    ranks. Sample order and augmentation come from (seed, epoch, index) alone: the same on
    every rank."""
    if rank == 0 and not parts:
        return seed
    return derive_seed(seed, -rank, *parts) % 2**32  # negative: apart from epochs; numpy: 32 bit


def rank_device(device: torch.device, ranks: Ranks, key: str = "trainer.device") -> torch.device:
    """The device of this rank: its own GPU (cuda:LOCAL_RANK) under DDP, else `device`."""
    if ranks.world_size == 1 or device.type == "cpu":
        return device
    if device.type != "cuda":
        raise ValueError(
            f"{key}={device}: distributed training runs on cuda (NCCL) or cpu "
            f"(gloo); set {key}=cuda or {key}=cpu."
        )
    if device.index not in (None, ranks.local_rank):
        raise ValueError(
            f"{key}={device}: under torchrun each rank uses cuda:LOCAL_RANK; set "
            f"{key}=cuda and choose GPUs with CUDA_VISIBLE_DEVICES."
        )
    return torch.device("cuda", ranks.local_rank)


def wrap_model(
    model: nn.Module, device: torch.device, ranks: Ranks, frozen: bool = False
) -> nn.Module:
    """`model` itself in one process; under DDP a `DataParallelModel` around it. `frozen`
    (trainer.freeze_epochs): some weights get no gradient in some epochs, which DDP's reducer
    is told to expect (find_unused_parameters) instead of waiting for them."""
    if ranks.world_size == 1:
        return model
    return DataParallelModel(
        model,
        device_ids=[device.index] if device.type == "cuda" else None,
        find_unused_parameters=frozen,
    )


class DataParallelModel(DistributedDataParallel):
    """DDP whose state dict is the wrapped model's own (no `module.` prefix), so a checkpoint
    written under torchrun loads into the plain model of a single-process run and back."""

    def state_dict(self, *args, **kwargs):  # type: ignore[no-untyped-def, override]
        return self.module.state_dict(*args, **kwargs)

    def load_state_dict(self, *args, **kwargs):  # type: ignore[no-untyped-def, override]
        return self.module.load_state_dict(*args, **kwargs)


def unwrap(model: nn.Module) -> nn.Module:
    """The plain model inside a DDP wrapper (the model itself otherwise)."""
    return model.module if isinstance(model, DistributedDataParallel) else model


def broadcast_module(model: nn.Module, src: int = 0, parameters: bool = False) -> None:
    """Copy rank `src`'s buffers (BatchNorm statistics; with `parameters`, the weights too) to
    every rank, e.g. so that all ranks evaluate the same model as the one checkpointed."""
    if not dist.is_initialized():
        return
    tensors = [*unwrap(model).buffers(), *(unwrap(model).parameters() if parameters else ())]
    for tensor in tensors:
        dist.broadcast(tensor.data, src)


def reduce_totals(totals: PassTotals) -> None:
    """Sum a pass's loss, metric sums and sample count over all ranks, in place (one
    all-reduce of them packed as float64; integer sums are rounded back); its rows, when a
    gathered metric keeps them, become every rank's."""
    if not dist.is_initialized():
        return
    tensors = totals.tensors()
    packed = torch.cat([t.double().flatten() for t in tensors])
    packed = torch.cat([packed, packed.new_tensor([totals.samples])])
    dist.all_reduce(packed)
    for tensor, value in zip(tensors, packed[:-1].split([t.numel() for t in tensors]), strict=True):
        value = value.view_as(tensor)
        tensor.copy_(value if tensor.is_floating_point() else value.round())
    totals.samples = int(packed[-1].round())
    if totals.rows is not None:  # a gathered metric's rows: every rank's, in rank order
        device = totals.loss_sum.device
        totals.set_rows({k: v.to(device) for k, v in gather_rows(totals.row_tensors()).items()})


def gather_rows(rows: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """Every rank's `rows` (tensors by name; a rank without samples has none), concatenated in
    rank order, on the CPU of each rank (as objects: the ranks' row counts differ)."""
    every: list[dict[str, torch.Tensor] | None] = [None] * dist.get_world_size()
    dist.all_gather_object(every, {key: tensor.cpu() for key, tensor in rows.items()})
    keys = {key for part in every if part for key in part}
    return {key: torch.cat([part[key] for part in every if part and key in part]) for key in keys}


def any_rank(flags: list[bool], device: torch.device) -> list[bool]:
    """Each flag true on at least one rank (one all-reduce for all of them; as is, alone).
    Ranks must take the same branch around collectives: a NaN skip, a save, a stop."""
    if not dist.is_initialized():
        return flags
    packed = torch.tensor([int(f) for f in flags], device=device)
    dist.all_reduce(packed, op=dist.ReduceOp.MAX)
    return [bool(v) for v in packed.tolist()]


def ranks_differ(count: int, device: torch.device) -> bool:
    """Whether `count` differs between the ranks (one all-reduce; False outside a group)."""
    if not dist.is_initialized():
        return False
    packed = torch.tensor([count, -count], device=device)
    dist.all_reduce(packed, op=dist.ReduceOp.MAX)
    return int(packed[0]) != -int(packed[1])


def gather_objects(obj: Any) -> list[Any]:
    """`obj` from every rank, in rank order (a list of one outside a process group)."""
    if not dist.is_initialized():
        return [obj]
    gathered: list[Any] = [None] * dist.get_world_size()
    dist.all_gather_object(gathered, obj)
    return gathered


def share_bad_samples(*loaders: DataLoader) -> None:
    """Under DDP with dataset.decode.on_error=skip: every rank's unreadable samples into every
    rank's ledger (rank 0 lists them in bad_samples.csv), then the split-wide limit check."""
    if not dist.is_initialized():
        return
    for loader in loaders:
        ledger = loader.bad_samples if isinstance(loader, Loader) else None
        if ledger is None:
            continue
        for records in gather_objects(list(ledger.seen.values())):
            ledger.record(r for r in records if r.index not in ledger.seen)
        ledger.check()
