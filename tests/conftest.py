"""Shared fixtures: a tiny demo set in a temp dir and a composer for the real config tree."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir
from omegaconf import DictConfig

from src.data.demo import make_demo_data
from src.utils.resolvers import register_resolvers

CONF_DIR = Path(__file__).resolve().parents[1] / "conf"

register_resolvers()


@pytest.fixture(scope="session")
def demo_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A small demo set: 48 train / 30 val images in all four formats, 900 / 180 sequences."""
    return make_demo_data(
        tmp_path_factory.mktemp("demo"),
        train_per_class=(12, 10, 10, 8, 8),
        val_per_class=6,
        shard_size=16,
        sequences=900,
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
