"""Moving batches to the device: one batch ahead on a side stream (CUDA), as they come elsewhere."""

from __future__ import annotations

from typing import Any

import pytest
import torch

from src.data.transforms import Normalizer
from src.training.batches import BatchMover, DeviceBatch
from src.training.prefetch import device_batches, side_stream_for

MEAN, STD = [0.485, 0.456, 0.406], [0.229, 0.224, 0.225]


def pixel_batches(count: int) -> list[tuple[torch.Tensor, torch.Tensor]]:
    gen = torch.Generator().manual_seed(0)
    return [
        (torch.randint(0, 256, (4, 3, 8, 8), dtype=torch.uint8, generator=gen), torch.arange(4) + i)
        for i in range(count)
    ]


class RecordingSide:
    """A stand-in side stream that logs when each batch is queued and handed over."""

    def __init__(self, events: list[str]) -> None:
        self.events = events

    def move(self, mover: BatchMover, batch: Any) -> DeviceBatch:
        self.events.append(f"queue {int(batch[1][0])}")
        return mover(batch)

    def hand_over(self, batch: DeviceBatch) -> None:
        self.events.append(f"hand over {int(batch.labels[0])}")


def test_the_next_batch_is_queued_before_the_current_one_is_used() -> None:
    mover = BatchMover(torch.device("cpu"), Normalizer(MEAN, STD), channels_last=False)
    events: list[str] = []
    for batch in device_batches(pixel_batches(3), mover, RecordingSide(events)):
        events.append(f"use {int(batch.labels[0])}")
    assert events == [
        "queue 0", "hand over 0",
        "queue 1", "use 0", "hand over 1",
        "queue 2", "use 1", "hand over 2",
        "use 2",
    ]  # fmt: skip


def test_lookahead_yields_every_batch_once_with_the_values_of_a_direct_move() -> None:
    mover = BatchMover(torch.device("cpu"), Normalizer(MEAN, STD), channels_last=False)
    batches = pixel_batches(4)
    direct = [mover(b) for b in batches]
    ahead = [
        DeviceBatch(b.inputs.clone(), b.labels, b.extras)  # the pool may reuse a freed buffer
        for b in device_batches(batches, mover, RecordingSide([]))
    ]
    assert len(ahead) == len(direct)
    for got, want in zip(ahead, direct, strict=True):
        torch.testing.assert_close(got.inputs, want.inputs, rtol=0, atol=0)
        assert torch.equal(got.labels, want.labels)


def test_no_side_stream_off_cuda_or_when_switched_off() -> None:
    assert side_stream_for(torch.device("cpu"), enabled=True) is None
    assert side_stream_for(torch.device("cuda"), enabled=False) is None


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_side_stream_batches_equal_direct_moves_on_cuda() -> None:
    device = torch.device("cuda")
    mover = BatchMover(device, Normalizer(MEAN, STD), channels_last=True)
    batches = [(x.pin_memory(), y.pin_memory()) for x, y in pixel_batches(6)]
    direct = [mover(b).inputs.cpu() for b in batches]
    side = side_stream_for(device, enabled=True)
    ahead = [b.inputs.float().sum().item() for b in device_batches(batches, mover, side)]
    assert ahead == pytest.approx([d.sum().item() for d in direct], rel=1e-6)
