"""What a checkpoint records of the run that wrote it, checked as hostile input before a resume
reads it: the topology, the sampler and the train listing (engine/runs/elastic.py), the
position in the epoch (`samples_done`), a stream's trained samples (engine/runs/
stream_resume.py) and the older engines' `world_size` / `num_workers`. Each is a schema of
engine/core/records.py, so a hand edit or a forged file is refused in one line naming the
field, never a raw TypeError deep in a resume."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any, TypedDict

import torch

from engine.core.bounds import Bound
from engine.core.records import Open, problem

# The most a count (epoch, step, batches) may be: past it a float (JSON, a plot's axis) no
# longer holds it exactly, and past 2**63 TensorBoard's int64 step fails deep in protobuf.
MAX_COUNT = 2**53
Counted = Annotated[int, Bound(0, MAX_COUNT)]  # an epoch's batches, a run's steps
AtLeastOne = Annotated[int, Bound(1, MAX_COUNT)]  # an epoch number, a world size
STREAM_TRAINED = "stream_trained"  # a stream's trained samples (engine/runs/stream_resume.py)


@dataclass(frozen=True)
class Topology:
    """How a job splits its optimizer steps: ranks, loader workers, per-rank batch,
    accumulation. A checkpoint records it (engine/runs/elastic.py), and this is its schema."""

    world_size: AtLeastOne
    num_workers: Counted
    batch_size: AtLeastOne | None
    grad_accum: AtLeastOne

    @property
    def global_batch(self) -> int | None:
        """Samples per optimizer step in the whole job."""
        if self.batch_size is None:
            return None
        return self.batch_size * self.world_size * self.grad_accum

    def described(self) -> str:
        """The global batch and the keys that make it, for a refusal or a warning."""
        return (
            f"{self.global_batch} (loader.batch_size {self.batch_size} x {self.world_size} "
            f"rank(s) x trainer.grad_accum {self.grad_accum})"
        )


class _Drawn(TypedDict):
    kind: str
    seed: int | float | str | None  # a stream's own
    draws: Counted | None


class Sampler(_Drawn, total=False):
    """The sampler's draw; replacement and sources where the sampler has them."""

    replacement: bool
    sources: list[tuple[str, Counted, Annotated[float, Bound(0, 1)]]]  # a mix's name, size, share


class Listing(TypedDict):
    """The train listing: its size and the digests of its files and labels."""

    size: Counted
    files: str | None
    labels: str | None


class _Trained(TypedDict):
    epoch: AtLeastOne
    size: Counted
    bits: torch.Tensor  # the packed bool per split index: (size + 7) // 8 uint8


class Trained(_Trained, total=False):
    replayable: bool  # since engine 2.1


class _Trainer(TypedDict, total=False):
    limit_train_batches: AtLeastOne | None


class SavedConfig(TypedDict, total=False):
    """The saved config as far as a resume reads it."""

    loader: dict[str, Any]
    trainer: Annotated[_Trainer, Open()]


# key -> its schema: read when present (older checkpoints lack them)
RECORDS: dict[str, Any] = {
    "topology": Topology,
    "sampler": Sampler,
    "data": Listing,
    "samples_done": Counted | None,
    STREAM_TRAINED: Trained | None,
    "config": Annotated[SavedConfig, Open()],
    "world_size": AtLeastOne,
    "num_workers": Counted,
}


def topology_problem(topology: dict[str, Any]) -> str | None:
    """Why `topology` (a Topology's fields) is none a job can have, naming its fields."""
    found = problem(topology, Topology, "topology")
    return None if found is None else f"{found} (a Topology's fields)"


def position_problem(state: dict[str, Any]) -> str | None:
    """Why the checkpoint's position in its epoch contradicts itself (None: it does not): an
    epoch's end (batches_done None) has no samples_done, and a stream's trained samples are of
    the epoch it stopped in, their bits one per sample."""
    if state["batches_done"] is None and state.get("samples_done") is not None:
        return (
            f"its samples_done is {state['samples_done']} at an epoch's end (batches_done "
            "None), where a training checkpoint holds None"
        )
    trained = state.get(STREAM_TRAINED)
    if trained is None:
        return None
    bits = trained["bits"]
    if bits.dtype != torch.uint8 or bits.dim() != 1 or len(bits) != (trained["size"] + 7) // 8:
        return (
            f"its stream_trained.bits is a {bits.dtype} tensor of shape {list(bits.shape)}, not "
            f"the {(trained['size'] + 7) // 8} uint8 bytes of its size {trained['size']}"
        )
    if state["batches_done"] is None or trained["epoch"] != state["epoch"]:
        return (
            f"its stream_trained is of epoch {trained['epoch']}, where a training checkpoint "
            f"holds the samples of the epoch it stopped in mid-way ({state['epoch']}) or None"
        )
    return None
