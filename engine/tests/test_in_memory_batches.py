"""In-memory data through the engine's loader: unaugmented tensor batches stay slices of the
stored tensors (the seeded wrapper draws nothing), and loader workers leave the objects they
inherit alone (frozen for the garbage collector)."""

from __future__ import annotations

import gc

import torch
from hydra.utils import instantiate

from engine.data.datasets.base import MapDataset
from engine.data.datasets.tensor import TensorFileDataset
from engine.data.loaders import make_loader
from engine.data.seeded import SeededSamples


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


def test_workers_freeze_what_they_inherit(reference_cfg) -> None:
    overrides = ("batch_size=2", "num_workers=1", "persistent_workers=false", "timeout=0")
    cfg = reference_cfg("w", *(f"loader.{o}" for o in overrides), "loader.shuffle=false")
    settings = instantiate(cfg.loader)
    counts = torch.cat(list(make_loader(_FrozenCount(), settings, None, drop_last=False)))
    assert bool((counts > 1000).all())  # the main process's objects, untouched by worker GC
