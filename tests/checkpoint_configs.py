"""The `on_checkpoint` fixture of the tests that run mode=eval and mode=predict on a trained
checkpoint. Kept out of conftest.py, which a project copies: it stands in for the engine's
reading of the command line (an internal name, which a project's own tests do not use)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from omegaconf import DictConfig

from tests.conftest import compose_config


@pytest.fixture
def on_checkpoint(demo_dir: Path, tmp_path: Path, monkeypatch) -> Callable[..., DictConfig]:
    """A config for a run on a checkpoint (mode=eval, predict); `*overrides` also stand for
    the command line's, whose keys replace the checkpoint's."""

    def _make(*overrides: str) -> DictConfig:
        monkeypatch.setattr("engine.inference.session.task_overrides", lambda: list(overrides))
        return compose_config(demo_dir, tmp_path / "out", *overrides)

    return _make
