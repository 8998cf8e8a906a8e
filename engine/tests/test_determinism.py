"""Randomness that repeats under a seed yet differs where it should (samples, workers, epochs)."""

from __future__ import annotations

import torch
from torch.utils.data import DataLoader

from engine.data.datasets.base import MapDataset
from engine.data.samplers import Draw, RandomOrder, WeightedOrder
from engine.data.seeded import SeededSamples
from engine_dev.fixtures import Labels


class RandomCrops(MapDataset):
    """Sample i = a random 'augmentation' drawn from torch's global RNG (like v2 transforms)."""

    def __len__(self) -> int:
        return 8

    def __getitem__(self, index: int) -> torch.Tensor:
        return torch.rand(4)


def _epoch(data: SeededSamples, epoch: int, workers: int) -> torch.Tensor:
    data.set_epoch(epoch)
    loader = DataLoader(data, batch_size=4, num_workers=workers)
    return torch.cat(list(loader))


def test_augmentations_repeat_under_the_seed_whatever_the_worker_count() -> None:
    data = SeededSamples(RandomCrops(), seed=0)
    zero, two = _epoch(data, 1, workers=0), _epoch(data, 1, workers=2)
    assert torch.equal(zero, two)  # the same draws in the main process and in 2 workers
    assert len({tuple(row.tolist()) for row in zero}) == 8  # no two samples share a crop
    assert not torch.equal(zero, _epoch(data, 2, workers=2))  # a new epoch, new crops
    assert torch.equal(zero, _epoch(SeededSamples(RandomCrops(), seed=0), 1, workers=0))
    assert not torch.equal(zero, _epoch(SeededSamples(RandomCrops(), seed=1), 1, workers=0))


def test_sample_seeding_leaves_the_callers_rng_alone() -> None:
    data = SeededSamples(RandomCrops(), seed=0)
    torch.manual_seed(5)
    expected = torch.rand(3)
    torch.manual_seed(5)
    data[3]
    assert torch.equal(torch.rand(3), expected)


def test_orders_differ_across_epochs_repeat_per_epoch_and_skip_exactly() -> None:
    sampler = RandomOrder(range(20), seed=3)
    sampler.set_epoch(1)
    first = list(sampler)
    sampler.set_epoch(2)
    assert list(sampler) != first and sorted(list(sampler)) == list(range(20))
    sampler.set_epoch(1)
    assert list(sampler) == first
    sampler.skip(8)
    assert len(sampler) == 12 and list(sampler) == first[8:]
    assert list(sampler) == first  # the skip applies to one pass only


def test_weighted_draws_repeat_per_epoch() -> None:
    labels = Labels([0, 1, 2, 2, 2, 2], 3)
    a, b = WeightedOrder(labels, 0, num_samples=50), WeightedOrder(labels, 0, num_samples=50)
    a.set_epoch(4)
    b.set_epoch(4)
    assert list(a) == list(b)
    b.set_epoch(5)
    assert list(a) != list(b)


def test_a_sample_drawn_twice_in_an_epoch_gets_a_new_augmentation() -> None:
    sampler = WeightedOrder(Labels(list(range(8)), 8), seed=0, num_samples=40)
    sampler.set_epoch(1)
    order = list(sampler)
    repeats = [k for k in order if isinstance(k, Draw)]
    assert len(repeats) == 40 - len({int(k) for k in order})  # every draw after the first
    data = SeededSamples(RandomCrops(), seed=0)
    data.set_epoch(1)
    first = {int(k): data[k] for k in order if not isinstance(k, Draw)}
    assert all(not torch.equal(data[k], first[int(k)]) for k in repeats)
    assert torch.equal(data[repeats[0]], data[repeats[0]])  # yet each repeats under the seed
    assert list(sampler) == order  # and the marks are part of the epoch's fixed order
