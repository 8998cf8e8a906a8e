"""Helpers for the tests of a project on the engine (the template's tests/ and the engine's own
engine/tests/ use them): the demo set as a session fixture, read-only; a dataset of bare
labels (generated hostile inputs are `engine_dev.hostile`)."""

from __future__ import annotations

import gc
import os
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
import torch

from engine.data.datasets.base import MapDataset
from engine.runs.sample_log import uses_by_epoch
from engine_dev.demo import make_demo_data
from engine_dev.shard_server import write_demo_shards, write_wds_shards
from engine_dev.small_sets import colour_folder


def tree_fingerprint(root: Path) -> dict[str, tuple[int, int, int]]:
    """(mode, size, mtime in ns) of `root` and every file, folder and link under it, by path
    relative to `root` (links are not followed)."""
    found = {}
    for folder, dirs, files in os.walk(root):
        for name in [".", *dirs, *files]:
            path = Path(folder, name)
            stat = path.lstat()
            found[str(path.relative_to(root))] = (stat.st_mode, stat.st_size, stat.st_mtime_ns)
    return found


def assert_each_once(run: Path, size: int = 48) -> None:
    """Every epoch of `run`'s samples.csv trained on each of the `size` samples exactly once
    (a resume on any topology, a stream's shares across ranks and workers)."""
    for epoch, counts in uses_by_epoch(run).items():
        assert sorted(counts) == list(range(size)) and set(counts.values()) == {1}, epoch


def pytest_configure(config: pytest.Config) -> None:
    """Under pytest-xdist (the template's `make test` runs `-n auto`) each worker keeps to its
    own share of the cores, and so do the runs and children it starts (the engine's thread and
    worker counts follow the affinity). Measured on 2 cores, the template's suite: one process
    ~540 s; two unpinned workers, whose torch threads contend, no faster (87 % at 8 min); two
    pinned workers 359 s. Only a real worker pins itself (xdist's own `workerinput`, not the
    environment a pytest started by a test inherits)."""
    given = getattr(config, "workerinput", None)
    if given is None:
        return
    count, worker = int(given["workercount"]), str(given["workerid"])
    cores = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []
    if count > 1 and worker.startswith("gw") and len(cores) >= count:
        os.sched_setaffinity(0, cores[int(worker[2:]) % count :: count])


@pytest.fixture(autouse=True, scope="session")
def loaders_end_in_the_session() -> Iterator[None]:
    """DataLoader iterators a test left behind (held by a kept traceback, a worker hung on
    purpose) end here, while the session runs. Left to the interpreter's exit, their workers'
    joins (up to 5 s each) outlast pytest-xdist's shutdown of its worker, which then sends it
    SIGINT (execnet, after 5 s): a green `make test` printed a KeyboardInterrupt traceback
    from a loader's __del__."""
    yield
    gc.collect()


@pytest.fixture(scope="session")
def demo_dir(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A small demo set: 48 train / 30 val images in all four formats, 900 / 180 sequences,
    40 / 16 multi-label images.

    Shared by the whole session, so read-only: a test that changes files copies what it needs
    into its own tmp_path first. The session fails at its end if anything under it changed."""
    root = make_demo_data(
        tmp_path_factory.mktemp("demo"),
        train_per_class=(12, 10, 10, 8, 8),
        val_per_class=6,
        shard_size=16,
        sequences=900,
        multilabel_train=40,
        multilabel_val=16,
    )
    before = tree_fingerprint(root)
    yield root
    after = tree_fingerprint(root)
    changed = sorted(p for p in before.keys() | after.keys() if before.get(p) != after.get(p))
    if changed:
        pytest.fail(
            f"a test changed the shared demo set {root} (created, modified or deleted "
            f"{len(changed)} path(s): {changed[:10]}): copy what a test changes into its "
            "tmp_path first.",
            pytrace=False,
        )


class Labels(MapDataset):
    """A dataset of (index, label) pairs with the given labels: samplers, loaders and their
    orders tested without files."""

    def __init__(self, labels: list[int], classes: int) -> None:
        self.targets = np.array(labels)
        self.classes = [str(i) for i in range(classes)]

    def __len__(self) -> int:
        return len(self.targets)

    def __getitem__(self, i: int) -> tuple[torch.Tensor, int]:
        return torch.tensor([i], dtype=torch.float32), int(self.targets[i])


@pytest.fixture(scope="module")
def wds_dir(demo_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The demo set as webdataset shards (write_demo_shards), once per test module."""
    return write_demo_shards(demo_dir, tmp_path_factory.mktemp("wds"))


@pytest.fixture
def mix_sources(tmp_path: Path) -> tuple[Path, Path]:
    """Two image folders to mix: a larger source (100 train: circle, square) and a smaller
    one (26: square, star), colour-coded (small_sets.colour_folder)."""
    big = colour_folder(tmp_path / "big", {"circle": (50, 6), "square": (50, 6)}, seed=1)
    small = colour_folder(tmp_path / "small", {"square": (16, 4), "star": (10, 4)}, seed=2)
    return big, small


@pytest.fixture
def bare_shards(demo_dir: Path, tmp_path: Path) -> Path:
    """The demo images as plain shards of 16 by webdataset's ShardWriter (train 48 samples in
    3 shards, val 30 in 2), with no manifest beside them (what a web server often holds)."""
    out = tmp_path / "served"
    for split in ("train", "val"):
        write_wds_shards(demo_dir / "imagefolder" / split, out, split)
    return out
