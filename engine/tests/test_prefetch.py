"""Moving batches to the device: one batch ahead on a side stream (CUDA), as they come elsewhere;
on the CPU beside loader workers, normalising on one thread."""

from __future__ import annotations

from functools import partial
from typing import Any

import pytest
import torch

from engine.data.transforms import Normalizer
from engine.modes import benchmark
from engine.training.batches import BatchMover, DeviceBatch
from engine.training.prefetch import device_batches, side_stream_for

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
        "queue 0",
        "hand over 0",
        "queue 1",
        "use 0",
        "hand over 1",
        "queue 2",
        "use 1",
        "hand over 2",
        "use 2",
    ]


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


class ThreadsSeen(Normalizer):
    """A normaliser that records torch's intra-op thread count while it runs."""

    def __init__(self) -> None:
        super().__init__(MEAN, STD)
        self.seen: list[int] = []

    def __call__(self, x: torch.Tensor, *args: Any) -> torch.Tensor:
        self.seen.append(torch.get_num_threads())
        return super().__call__(x, *args)


@pytest.mark.parametrize(("beside_workers", "inside"), [(True, 1), (False, 2)])
def test_cpu_normalising_uses_one_thread_only_beside_workers(beside_workers, inside) -> None:
    normalizer = ThreadsSeen()
    mover = BatchMover(torch.device("cpu"), normalizer, False, beside_workers=beside_workers)
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        mover(pixel_batches(1)[0])
        assert normalizer.seen == [inside]
        assert torch.get_num_threads() == 2
        with pytest.raises(ValueError, match="channels"):
            mover((torch.zeros(2, 1, 4, 4, dtype=torch.uint8), torch.zeros(2)))
        assert torch.get_num_threads() == 2  # restored after an error too
    finally:
        torch.set_num_threads(before)


class Clock:
    """A clock that only the dataset moves: 1 s per sample."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


class OneSecondSamples(torch.utils.data.Dataset):
    def __init__(self, clock: Clock) -> None:
        self.clock = clock

    def __len__(self) -> int:
        return 100

    def __getitem__(self, index: int) -> tuple[torch.Tensor, int]:
        self.clock.now += 1.0
        return torch.zeros(3, 2, 2, dtype=torch.uint8), index


@pytest.mark.parametrize("warmup", [0, 2])
def test_benchmark_counts_the_loaders_deliveries_with_a_lookahead(warmup) -> None:
    clock = Clock()
    loader = torch.utils.data.DataLoader(OneSecondSamples(clock), batch_size=1)
    mover = BatchMover(torch.device("cpu"), Normalizer(MEAN, STD), channels_last=False)
    settings = benchmark.BenchmarkSettings(batches=3, warmup=warmup, compute="normalize")
    ahead = partial(device_batches, mover=mover, side=RecordingSide([]))
    metrics = benchmark.time_loader(loader, settings, ahead, clock=clock)
    assert metrics["loader/first_batch_s"] == 1.0  # one sample's time, not two
    assert metrics["loader/samples_per_s"] == 1.0  # the lookahead's fetch counts as delivered
    assert metrics["loader/samples_per_s_min"] == metrics["loader/samples_per_s_max"] == 1.0
    assert metrics["loader/data_wait_frac"] == 1.0
