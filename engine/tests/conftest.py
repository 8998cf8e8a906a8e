"""The engine's own suite: the demo set fixture (engine_dev.fixtures), and the reference project
(reference_project/: train.py, conf/, its own model, step and loop) that the end-to-end tests
drive instead of any template's src/. Tests under process/ start child processes (torchrun,
kill -9, signals) and are marked `process` by that folder."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir
from omegaconf import DictConfig

from engine.app import register_resolvers

pytest_plugins = ("engine_dev.fixtures",)
REFERENCE = Path(__file__).resolve().parent / "reference_project"
TRAIN = REFERENCE / "train.py"
PROCESS = Path(__file__).resolve().parent / "process"
sys.path.insert(0, str(REFERENCE))  # `reference`, as train.py's own folder gives it to a run
register_resolvers()


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Every test under process/ is a `process` test (`make test-fast` leaves them out)."""
    for item in items:
        if PROCESS in item.path.parents:
            item.add_marker(pytest.mark.process)


def reference_args(demo_dir: Path, log_dir: Path, *overrides: str) -> list[str]:
    """The command line of a reference-project run on `demo_dir`, its runs under `log_dir`."""
    return [f"paths.demo_dir={demo_dir}", f"paths.log_dir={log_dir}", *overrides]


def compose_reference(demo_dir: Path, log_dir: Path, run_dir: Path, *overrides: str) -> DictConfig:
    """The reference project's config with `overrides`, on `demo_dir`, writing to `run_dir`
    (paths.log_dir is `log_dir`): what a module-scoped fixture trains once."""
    with initialize_config_dir(config_dir=str(REFERENCE / "conf"), version_base="1.3"):
        return compose(
            config_name="config",
            overrides=[
                *reference_args(demo_dir, log_dir, *overrides),
                f"paths.output_dir={run_dir}",
            ],
        )


@pytest.fixture
def reference_cfg(demo_dir: Path, tmp_path: Path) -> Callable[..., DictConfig]:
    """The reference project's config with `overrides`, on the demo set, writing under
    tmp_path/`name` (the run dir; paths.log_dir is tmp_path)."""

    def _compose(name: str, *overrides: str) -> DictConfig:
        return compose_reference(demo_dir, tmp_path, tmp_path / name, *overrides)

    return _compose
