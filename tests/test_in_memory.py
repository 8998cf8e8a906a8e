"""In-memory data as conf/ configures it: no loader workers unless the user set a count, and
image files keep the template's default (batches that stay slices and workers that leave
inherited objects alone: the engine's suite, engine/tests/test_in_memory_batches.py)."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir
from omegaconf import DictConfig

from engine.api import assemble
from engine.core.cpus import half_the_cores
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
