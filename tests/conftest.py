"""Shared fixtures: a tiny demo set in a temp dir and a composer for the real config tree."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir
from omegaconf import DictConfig

from engine.app import register_resolvers
from engine.data.demo import make_demo_data

CONF_DIR = Path(__file__).resolve().parents[1] / "conf"

register_resolvers()


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


@pytest.fixture(scope="session")
def demo_dir(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A small demo set: 48 train / 30 val images in all four formats, 900 / 180 sequences.

    Shared by the whole session, so read-only: a test that changes files copies what it needs
    into its own tmp_path first. The session fails at its end if anything under it changed."""
    root = make_demo_data(
        tmp_path_factory.mktemp("demo"),
        train_per_class=(12, 10, 10, 8, 8),
        val_per_class=6,
        shard_size=16,
        sequences=900,
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


@pytest.fixture
def make_cfg(demo_dir: Path, tmp_path: Path) -> Callable[..., DictConfig]:
    """Compose conf/config.yaml with `overrides`, pointed at the tiny demo set and tmp_path."""

    def _compose(*overrides: str) -> DictConfig:
        with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
            return compose(
                config_name="config",
                overrides=[
                    f"paths.demo_dir={demo_dir}",
                    f"paths.output_dir={tmp_path / 'run'}",
                    "loader.batch_size=16",
                    "loader.num_workers=0",
                    *overrides,
                ],
            )

    return _compose
