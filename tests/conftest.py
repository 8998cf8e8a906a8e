"""Shared fixtures: the engine's tiny demo set (engine.testing) and a composer for conf/."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir
from omegaconf import DictConfig

from engine.app import register_resolvers

pytest_plugins = ("engine.testing",)  # the demo_dir fixture
CONF_DIR = Path(__file__).resolve().parents[1] / "conf"

register_resolvers()


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
