"""Moving batch i+1 to the GPU while the model computes on batch i (`trainer.device_prefetch`).

On CUDA the copy (non_blocking from pinned memory) and the normalisation of the next batch are
queued on a side stream as soon as the loader hands it over, before the current batch is given
to the model; the compute stream waits for that side stream only when it takes the batch. On
other devices batches are moved one at a time, as they come, with no lookahead.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any, Protocol

import torch

from engine.training.batches import BatchMover, DeviceBatch


class SideStream(Protocol):
    """Where a batch's move is queued, and how the consumer's stream is made to wait for it."""

    def move(self, mover: BatchMover, batch: Any) -> DeviceBatch:
        """Queue `mover(batch)` off the compute stream; returns before it has run."""
        ...

    def hand_over(self, batch: DeviceBatch) -> None:
        """Make the compute stream wait for `batch`'s move, and keep its memory alive there."""
        ...


class CudaSideStream:
    """A CUDA stream of its own for host-to-device copies and normalisation."""

    def __init__(self, device: torch.device) -> None:
        self.stream = torch.cuda.Stream(device)

    def move(self, mover: BatchMover, batch: Any) -> DeviceBatch:
        on_device = [t for t in batch if isinstance(t, torch.Tensor) and t.is_cuda]
        if on_device:  # decoded on the GPU (dataset.decode.device=cuda), on the compute stream
            self.stream.wait_stream(torch.cuda.current_stream(self.stream.device))
            for tensor in on_device:
                tensor.record_stream(self.stream)
        with torch.cuda.stream(self.stream):
            return mover(batch)

    def hand_over(self, batch: DeviceBatch) -> None:
        compute = torch.cuda.current_stream(self.stream.device)
        compute.wait_stream(self.stream)
        for tensor in (batch.inputs, batch.labels, *batch.extras):
            # made on the side stream, used on the compute stream: the caching allocator must
            # not hand this memory out again before the compute stream is done with it
            tensor.record_stream(compute)


def side_stream_for(device: torch.device, enabled: bool) -> SideStream | None:
    """A CUDA side stream when `enabled` on a CUDA device, else None (move as they come)."""
    return CudaSideStream(device) if enabled and device.type == "cuda" else None


def device_batches(
    batches: Iterable[Any], mover: BatchMover, side: SideStream | None
) -> Iterator[DeviceBatch]:
    """`mover(batch)` for every batch; with a side stream, one batch ahead: the next batch's
    move is queued before the current one is yielded."""
    if side is None:
        for batch in batches:
            yield mover(batch)
        return
    ready: DeviceBatch | None = None
    for batch in batches:
        queued = side.move(mover, batch)
        if ready is not None:
            yield ready
        side.hand_over(queued)
        ready = queued
    if ready is not None:
        yield ready
