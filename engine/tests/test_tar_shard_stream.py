"""Tar shards: each sample exactly once per epoch at any worker count; order changes per epoch."""

from __future__ import annotations

import io
import tarfile
from collections import Counter
from functools import partial
from pathlib import Path

import pytest
from hydra.utils import instantiate
from torch.utils.data import DataLoader
from torchvision.transforms import v2

from engine.data.datasets.tar_shards import ShardError, TarShardDataset
from engine.data.loaders import build_loaders
from engine.data.resolve_loader import resolve_loader_settings
from engine.data.samplers import RandomOrder


def _shards(demo_dir: Path, split: str = "train") -> TarShardDataset:
    return TarShardDataset(
        split,
        str(demo_dir / "shards" / "train-*.tar"),
        str(demo_dir / "shards" / "val-*.tar"),
        shuffle_buffer=8,
        seed=0,
    )


@pytest.mark.parametrize("workers", [0, 1, 2])
def test_each_sample_once_per_epoch(demo_dir: Path, workers: int) -> None:
    data = _shards(demo_dir)
    assert len(data.shards) >= 2
    loader = DataLoader(data, batch_size=None, num_workers=workers)
    labels = Counter(int(label) for _, label in loader)
    assert labels == Counter(data.targets.tolist())
    images = [x.numpy().tobytes() for x, _ in loader]
    assert len(images) == len(data) == len(set(images))


def test_shuffled_order_changes_every_epoch_with_persistent_workers(demo_dir: Path) -> None:
    data = _shards(demo_dir)
    loader = DataLoader(data, batch_size=None, num_workers=2, persistent_workers=True)
    orders = []
    for epoch in range(3):
        data.set_epoch(epoch)
        orders.append([x.numpy().tobytes() for x, _ in loader])
    assert sorted(orders[0]) == sorted(orders[1]) == sorted(orders[2])
    assert orders[0] != orders[1] and orders[1] != orders[2]


def test_val_stream_keeps_its_order(demo_dir: Path) -> None:
    data = _shards(demo_dir, "val")
    assert not data.shuffle
    first = [x.numpy().tobytes() for x, _ in DataLoader(data, batch_size=None)]
    again = [x.numpy().tobytes() for x, _ in DataLoader(data, batch_size=None)]
    assert first == again


def test_classes_come_from_classes_txt(demo_dir: Path) -> None:
    data = _shards(demo_dir)
    assert data.classes == (demo_dir / "shards" / "classes.txt").read_text().split()


def test_workers_keep_every_sample_of_the_stream_with_drop_last(reference_cfg, demo_dir) -> None:
    data = _shards(demo_dir)
    data.transform = v2.Resize((16, 16))  # batches need equal sizes
    order = partial(RandomOrder, seed=0)
    cfg = reference_cfg("run", "loader.num_workers=2", "loader.drop_last=true")
    settings = instantiate(cfg.loader)
    settings = resolve_loader_settings(settings, data, order, cuda=False)
    train, _ = build_loaders(data, data, settings, order)
    assert not train.drop_last  # each worker's last partial batch is kept
    assert sum(len(labels) for _, labels in train) == len(data)


def _tar(path: Path, members: dict[str, bytes]) -> Path:
    with tarfile.open(path, "w") as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return path


def test_a_class_name_in_a_cls_member_names_the_member(demo_dir: Path, tmp_path: Path) -> None:
    image = next((demo_dir / "imagefolder" / "train" / "circle").glob("*.jpg")).read_bytes()
    shard = _tar(tmp_path / "named.tar", {"a.jpg": image, "a.cls": b"circle"})
    with pytest.raises(
        ShardError, match=r"named\.tar::a\.cls: a \.cls member must hold a class index"
    ):
        TarShardDataset("train", str(shard), str(shard))


@pytest.mark.parametrize("cut", [700, 5000])
def test_a_truncated_shard_names_the_shard(demo_dir: Path, tmp_path: Path, cut: int) -> None:
    data = (demo_dir / "shards" / "train-000000.tar").read_bytes()
    broken = tmp_path / "cut.tar"
    broken.write_bytes(data[:cut])
    with pytest.raises(ShardError, match=r"cut\.tar: (not a readable tar shard|a damaged tar)"):
        list(TarShardDataset("train", str(broken), str(broken)))
