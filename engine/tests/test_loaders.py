"""Loader knobs: inapplicable settings are normalised, samplers and shuffle reconciled."""

from __future__ import annotations

import logging
from dataclasses import replace
from functools import partial
from pathlib import Path

import numpy as np
import pytest
import torch
import torch.multiprocessing as torch_mp
from hydra.errors import InstantiationException
from hydra.utils import instantiate
from torch.utils.data import Dataset, RandomSampler, SequentialSampler

from engine.core.seeding import derive_seed
from engine.data.datasets.tensor import TensorFileDataset
from engine.data.loader_settings import LoaderSettings
from engine.data.loaders import build_loaders
from engine.data.resolve_loader import resolve_loader_settings
from engine.data.samplers import (
    RandomOrder,
    SequentialOrder,
    WeightedOrder,
)
from engine_dev.fixtures import Labels

shuffled = partial(RandomOrder, seed=0)


def _settings(reference_cfg, *overrides: str, data: Dataset | None = None) -> LoaderSettings:
    """The loader group as configured, resolved for `data` on a CPU."""
    settings = instantiate(reference_cfg("l", *overrides).loader)
    return resolve_loader_settings(settings, data or Labels([0, 1] * 20, 2), shuffled, cuda=False)


def test_knobs_that_need_workers_are_unset_with_one_note(reference_cfg, caplog) -> None:
    data = Labels([0, 1] * 20, 2)
    with caplog.at_level(logging.INFO, logger="engine.data.resolve_loader"):
        settings = _settings(
            reference_cfg,
            "loader.num_workers=0",
            "loader.prefetch_factor=4",
            "loader.persistent_workers=true",
            "loader.multiprocessing_context=spawn",
            "loader.pin_memory=true",
        )
    train, val = build_loaders(data, data, settings, shuffled)
    notes = [r.getMessage() for r in caplog.records if "adjusted" in r.getMessage()]
    assert len(notes) == 1
    for key in ("prefetch_factor", "persistent_workers", "multiprocessing_context", "pin_memory"):
        assert f"loader.{key}" in notes[0]
    assert train.prefetch_factor is None and not train.persistent_workers and not train.pin_memory
    assert len(list(train)) == 40 // 16  # drop_last on train
    assert sum(len(y) for _, y in val) == 40  # val keeps every sample, in order


def test_val_loader_is_sequential_and_keeps_last_batch(reference_cfg) -> None:
    data = Labels([0, 1, 2] * 11, 3)
    train, val = build_loaders(data, data, _settings(reference_cfg), shuffled)
    assert isinstance(train.sampler, RandomOrder) and train.drop_last
    assert isinstance(val.sampler, SequentialSampler) and not val.drop_last
    assert torch.cat([x for x, _ in val]).flatten().tolist() == list(range(33))


@pytest.mark.parametrize(
    ("factory", "shuffle", "expected", "note"),
    [
        (shuffled, True, RandomOrder, None),
        (shuffled, False, SequentialOrder, "loader.shuffle=false"),
        (SequentialOrder, True, SequentialOrder, "sampler=sequential"),
        (partial(WeightedOrder, seed=0), True, WeightedOrder, "loader.shuffle=true unused"),
    ],
)
def test_sampler_and_shuffle_never_collide(reference_cfg, caplog, factory, shuffle, expected, note):
    data = Labels([0, 1] * 20, 2)
    settings = _settings(reference_cfg, f"loader.shuffle={str(shuffle).lower()}")
    with caplog.at_level(logging.INFO, logger="engine.data.loaders"):
        train, _ = build_loaders(data, data, settings, factory)
    assert isinstance(train.sampler, expected)
    if note:
        assert note in caplog.text
    else:
        assert "shuffle" not in caplog.text and "sampler" not in caplog.text


def test_shuffled_order_is_torchs_randperm_of_the_epoch_seed() -> None:
    # the same orders as int64 randperm (what earlier versions drew), for a set over 2**16
    sampler = RandomOrder(range(70_001), seed=3)
    sampler.set_epoch(2)
    generator = torch.Generator().manual_seed(derive_seed(3, 2))
    assert list(sampler) == torch.randperm(70_001, generator=generator).tolist()


def test_weighted_sampler_balances_an_imbalanced_set() -> None:
    labels = [0] * 900 + [1] * 90 + [2] * 10
    sampler = WeightedOrder(Labels(labels, 3), seed=0, replacement=True, num_samples=30000)
    drawn = np.bincount(np.array(labels)[list(sampler)], minlength=3) / 30000
    assert np.allclose(drawn, 1 / 3, atol=0.02), drawn
    generator = torch.Generator().manual_seed(0)
    unweighted = RandomSampler(Labels(labels, 3), True, num_samples=30000, generator=generator)
    plain = np.bincount(np.array(labels)[list(unweighted)], minlength=3) / 30000
    assert np.allclose(plain, [0.9, 0.09, 0.01], atol=0.02), plain  # the majority dominates
    assert drawn[2] > 20 * plain[2]  # the rare class: ~33x as often as an unweighted draw


def test_invalid_knob_names_the_key(reference_cfg) -> None:
    with pytest.raises(InstantiationException, match=r"loader\.batch_size=0: expected int >= 1"):
        instantiate(reference_cfg("l", "loader.batch_size=0").loader)


def test_batch_larger_than_train_set_is_explained(reference_cfg) -> None:
    data = Labels([0, 1] * 4, 2)
    with pytest.raises(ValueError, match=r"loader\.batch_size=16.*loader\.drop_last"):
        build_loaders(data, data, _settings(reference_cfg), shuffled)


def test_loader_runs_under_spawn(reference_cfg, demo_dir: Path) -> None:
    settings = replace(
        _settings(reference_cfg, "loader.num_workers=2", "loader.multiprocessing_context=spawn"),
        batch_size=8,
    )
    data = TensorFileDataset(
        "train",
        str(demo_dir / "tensors" / "train.pt"),
        val_path=str(demo_dir / "tensors" / "val.pt"),
    )
    train, _ = build_loaders(data, data, settings, SequentialOrder)
    assert train.multiprocessing_context.get_start_method() == "spawn"
    inputs = torch.cat([x for x, _ in train])
    assert torch.equal(inputs, data.inputs[: len(inputs)])


class StrategyLabels(Labels):
    """Labels whose every sample is 1 where its worker shares tensors by file_system."""

    def __getitem__(self, index: int) -> tuple[torch.Tensor, int]:
        _, label = super().__getitem__(index)
        return torch.tensor(torch_mp.get_sharing_strategy() == "file_system"), label


@pytest.mark.parametrize(
    ("world_size", "given", "started_by"),
    [(2, "null", "forkserver"), (2, "fork", "fork"), (1, "null", None)],
)
def test_torchrun_ranks_start_workers_by_forkserver(
    reference_cfg, caplog, world_size, given, started_by
):
    # a rank runs threads, and forking it can hang in os.fork() (CPython gh-112275)
    settings = instantiate(
        reference_cfg("l", "loader.num_workers=2", f"loader.multiprocessing_context={given}").loader
    )
    with caplog.at_level(logging.INFO, logger="engine.data.resolve_loader"):
        resolved = resolve_loader_settings(
            settings, Labels([0, 1] * 20, 2), shuffled, cuda=False, world_size=world_size
        )
    assert resolved.multiprocessing_context == started_by
    said = caplog.text.count("loader.multiprocessing_context=forkserver under torchrun")
    assert said == (given == "null" and world_size > 1)


def test_forkserver_workers_share_by_the_configured_strategy(reference_cfg) -> None:
    # a forked worker inherits loader.sharing_strategy; a forkserver one sets it itself
    settings = replace(
        _settings(
            reference_cfg, "loader.num_workers=1", "loader.multiprocessing_context=forkserver"
        ),
        batch_size=4,
    )
    data = StrategyLabels([0, 1] * 4, 2)
    before = torch_mp.get_sharing_strategy()
    torch_mp.set_sharing_strategy("file_system")
    try:
        train, _ = build_loaders(data, data, settings, SequentialOrder)
        shared = torch.cat([x for x, _ in train])
    finally:
        torch_mp.set_sharing_strategy(before)
    assert shared.tolist() == [True] * 8


def test_collate_fn_from_config_is_used(reference_cfg) -> None:
    settings = _settings(
        reference_cfg,
        "loader.collate_fn={_target_:engine.data.collate.already_batched,_partial_:true}",
    )
    data = Labels([0, 1] * 20, 2)
    train, _ = build_loaders(data, data, settings, SequentialOrder)
    batch = next(iter(train))
    assert isinstance(batch, list) and len(batch) == 16  # samples left unstacked
    assert batch[3][1] == 1
