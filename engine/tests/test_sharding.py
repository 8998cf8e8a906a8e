"""Each rank's share of the data: train orders padded and new every epoch, val split without
padding, weighted draws balanced per rank, streams read exactly once across ranks x workers."""

from __future__ import annotations

from collections import Counter
from functools import partial
from pathlib import Path

import pytest
from hydra.utils import instantiate
from torch.utils.data import DataLoader, Dataset

from engine.core import cpus
from engine.data.datasets.tar_shards import TarShardDataset
from engine.data.loaders import build_loaders
from engine.data.resolve_loader import resolve_loader_settings
from engine.data.samplers import RandomOrder, WeightedOrder
from engine_dev.fixtures import Labels


def _rank_loaders(
    reference_cfg, data: Dataset, sampler, world: int
) -> list[tuple[DataLoader, ...]]:
    settings = instantiate(
        reference_cfg("r", "loader.batch_size=4", "loader.drop_last=false").loader
    )
    settings = resolve_loader_settings(settings, data, sampler, cuda=False)
    return [
        build_loaders(data, data, settings, sampler, rank=rank, world_size=world)
        for rank in range(world)
    ]


def _indices(loader: DataLoader) -> list[int]:
    return [int(i) for batch, _ in loader for i in batch]


def test_train_shares_are_disjoint_padded_and_new_every_epoch(reference_cfg) -> None:
    data = Labels([0, 1] * 11 + [0], 2)  # 23 samples: not a multiple of 2 ranks
    ranks = _rank_loaders(reference_cfg, data, partial(RandomOrder, seed=0), world=2)
    orders = []
    for epoch in (1, 2):
        shares = []
        for train, _ in ranks:
            train.sampler.set_epoch(epoch)
            shares.append(_indices(train))
        assert [len(s) for s in shares] == [12, 12]  # equal batches per rank: 1 padded
        together = shares[0] + shares[1]
        assert sorted(set(together)) == list(range(23)) and len(together) == 24
        orders.append(shares)
    assert orders[0][0] != orders[1][0] and orders[0][1] != orders[1][1]


def test_skip_counts_positions_of_the_whole_job_so_each_rank_goes_on_in_its_share(
    reference_cfg,
) -> None:
    data = Labels([0, 1] * 10, 2)
    for train, _ in _rank_loaders(reference_cfg, data, partial(RandomOrder, seed=0), world=2):
        train.sampler.set_epoch(3)
        full = _indices(train)
        train.sampler.skip(8)  # 4 positions of each of the 2 ranks
        assert _indices(train) == full[4:]
        with pytest.raises(ValueError, match="cannot skip 21 of 20"):
            train.sampler.skip(21)


@pytest.mark.parametrize("world", [2, 3])
def test_val_shares_count_every_sample_exactly_once(reference_cfg, world: int) -> None:
    data = Labels([0, 1, 2] * 10 + [0], 3)  # 31 samples: uneven shares, no padding
    loaders = _rank_loaders(reference_cfg, data, partial(RandomOrder, seed=0), world)
    shares = [_indices(val) for _, val in loaders]
    assert sorted(i for share in shares for i in share) == list(range(31))
    assert max(map(len, shares)) - min(map(len, shares)) <= 1


def test_distributed_weighted_draws_keep_the_class_balance_on_every_rank(reference_cfg) -> None:
    data = Labels([0] * 800 + [1] * 150 + [2] * 50, 3)  # 16:3:1 imbalance
    sampler = partial(WeightedOrder, seed=0, num_samples=6000)
    ranks = _rank_loaders(reference_cfg, data, sampler, world=2)
    draws = []
    for train, _ in ranks:
        train.sampler.set_epoch(1)
        draws.append(Counter(int(data.targets[i]) for i in _indices(train)))
    for counts in draws:
        assert sum(counts.values()) == 3000
        assert all(abs(counts[c] / 3000 - 1 / 3) < 0.04 for c in range(3)), counts
    whole = WeightedOrder(data, seed=0, num_samples=6000)
    whole.set_epoch(1)
    assert sum(draws, Counter()) == Counter(int(data.targets[i]) for i in whole)


def _shards(demo_dir: Path, split: str) -> TarShardDataset:
    pattern = str(demo_dir / "shards" / f"{split}-*.tar")
    return TarShardDataset(split, pattern, pattern, shuffle_buffer=8, seed=0)


@pytest.mark.parametrize("split", ["train", "val"])
def test_stream_is_read_exactly_once_across_2_ranks_x_2_workers(demo_dir: Path, split) -> None:
    whole = [x.numpy().tobytes() for x, _ in DataLoader(_shards(demo_dir, split), batch_size=None)]
    for epoch in (1, 2):
        read, lengths = [], set()
        for rank in range(2):
            data = _shards(demo_dir, split)
            data.distribute(rank, 2)
            data.set_epoch(epoch)
            lengths.add(len(data))
            read += [
                x.numpy().tobytes() for x, _ in DataLoader(data, batch_size=None, num_workers=2)
            ]
        assert sorted(read) == sorted(whole) and len(set(read)) == len(whole)
        assert len(lengths) == 1  # every rank plans the same schedule length


def test_half_the_cores_are_divided_among_torchruns_ranks(monkeypatch) -> None:
    monkeypatch.setattr(cpus, "available_cpus", lambda: 16)
    monkeypatch.delenv("TORCHELASTIC_RUN_ID", raising=False)
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "4")
    assert cpus.half_the_cores() == 8  # not started by torchrun: this process has the cores
    monkeypatch.setenv("TORCHELASTIC_RUN_ID", "job")
    assert cpus.half_the_cores() == 2  # 4 ranks on this node: 16 / 4 / 2
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "64")
    assert cpus.half_the_cores() == 1
