"""In-memory data: no loader workers unless the user set a count; batches stay slices;
workers leave inherited objects alone."""

from __future__ import annotations

import gc
import logging
from pathlib import Path

import pytest
import torch
from hydra import compose, initialize_config_dir
from omegaconf import DictConfig

from engine.core.cpus import half_the_cores
from engine.data.datasets.base import MapDataset
from engine.data.datasets.tensor import TensorFileDataset
from engine.data.loader_settings import LoaderSettings
from engine.data.loaders import make_loader
from engine.data.seeded import SeededSamples
from engine.training.assemble import assemble
from tests.conftest import CONF_DIR


def _cfg(demo_dir: Path, tmp_path: Path, *overrides: str) -> DictConfig:
    """The real config without conftest's `loader.num_workers=0`: the default count stays."""
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        return compose(
            config_name="config",
            overrides=[f"paths.demo_dir={demo_dir}", f"paths.output_dir={tmp_path}", *overrides],
        )


def test_in_memory_data_gets_no_workers_by_default(demo_dir, tmp_path, caplog) -> None:
    with caplog.at_level(logging.INFO, logger="engine.data.resolve_loader"):
        parts = assemble(_cfg(demo_dir, tmp_path, "dataset=tensor"))
    assert parts.train_loader.num_workers == 0 and parts.val_loader.num_workers == 0
    assert "loader.num_workers=null: 0 for TensorFileDataset, held in memory" in caplog.text
    assert "set a count to use workers" in caplog.text


@pytest.mark.parametrize("count", ["1", "2"])
def test_a_count_the_user_sets_is_kept(demo_dir, tmp_path, count: str) -> None:
    parts = assemble(_cfg(demo_dir, tmp_path, "dataset=tensor", f"loader.num_workers={count}"))
    assert parts.train_loader.num_workers == int(count)


def test_image_files_keep_the_default_workers(demo_dir, tmp_path) -> None:
    cfg = _cfg(demo_dir, tmp_path, "dataset=imagefolder")
    assert cfg.loader.num_workers is None  # the default: the template decides
    assert assemble(cfg).train_loader.num_workers == half_the_cores() >= 1


def test_unaugmented_tensor_batches_are_the_same_slices_through_the_seeded_wrapper(demo_dir):
    data = TensorFileDataset("train", str(demo_dir / "tensors" / "train.pt"), val_fraction=0.2)
    assert data.draws_random is False
    state = torch.get_rng_state()
    inputs, labels = SeededSamples(data, seed=0).__getitems__([5, 1, 7])
    assert torch.equal(torch.get_rng_state(), state)
    assert torch.equal(inputs, data.inputs[[5, 1, 7]]) and torch.equal(
        labels, data.labels[[5, 1, 7]]
    )


class _FrozenCount(MapDataset):
    """Each sample: how many objects the worker's garbage collector has set aside."""

    def __len__(self) -> int:
        return 4

    def __getitem__(self, index: int) -> int:
        return gc.get_freeze_count()


def test_workers_freeze_what_they_inherit() -> None:
    settings = LoaderSettings(
        batch_size=2,
        shuffle=False,
        num_workers=1,
        collate_fn=None,
        pin_memory=False,
        drop_last=False,
        prefetch_factor=2,
        persistent_workers=False,
        timeout=0,
        multiprocessing_context="fork",
    )
    counts = torch.cat(list(make_loader(_FrozenCount(), settings, None, drop_last=False)))
    assert bool((counts > 1000).all())  # the main process's objects, untouched by worker GC
