"""Shared fixtures: the engine's tiny demo set (engine_dev.fixtures) and a composer for conf/."""

from __future__ import annotations

import functools
import os
from collections.abc import Callable, Iterator
from importlib import resources
from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir
from omegaconf import DictConfig

from engine.api import register_resolvers

pytest_plugins = ("engine_dev.fixtures",)  # the demo_dir fixture
ROOT = Path(__file__).resolve().parents[1]
CONF_DIR = ROOT / "conf"
ENGINE_CONF_DIR = Path(str(resources.files("engine.conf")))  # pkg://engine.conf, installed


def group_options(*skipped: str) -> list[tuple[str, str]]:
    """Every (group, option) a run can choose, the project's and the engine's, less `skipped`
    groups (hydra/ holds Hydra's own groups, one level down)."""
    found = {
        (option.parent.name, option.stem)
        for folder in (CONF_DIR, ENGINE_CONF_DIR)
        for option in folder.glob("*/*.yaml")
        if option.parent.name not in ("hydra", *skipped)
    }
    return sorted(found)


register_resolvers()
PROCESS = ROOT / "tests" / "process"


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Every test under tests/process/ starts child processes and is marked `process` by
    that folder (`make test-fast` leaves them out); engine/tests/conftest.py does the same."""
    for item in items:
        if PROCESS in item.path.parents:
            item.add_marker(pytest.mark.process)


def _written(root: Path) -> set[str]:
    """What a run may leave in the checkout: the top-level entries, everything under outputs/
    (a link with where it points: outputs/latest rewritten shows)."""
    under = {
        f"{p.relative_to(root).as_posix()} -> {os.readlink(p) if p.is_symlink() else ''}"
        for p in (root / "outputs").rglob("*")
    }
    return {p.name for p in root.iterdir()} | under


@pytest.fixture(autouse=True, scope="session")
def checkout_untouched() -> Iterator[None]:
    """No test writes into the checkout: every run goes to tmp_path (paths.log_dir, or a fixed
    hydra.run.dir); the session fails at its end naming what appeared."""
    before = _written(ROOT)
    yield
    appeared = sorted(_written(ROOT) - before - {".pytest_cache", "__pycache__"})
    assert not appeared, f"tests wrote into the checkout: {appeared[:5]}"


# Models made tiny for the tests, by their _target_: the same code at a fraction of the step
# time (small_cnn: a third). The project's default model is narrowed when it is listed here, and
# runs as configured otherwise: add yours when its steps are slow. A test that picks a model (or
# an experiment, which does) keeps that model as configured.
TINY_MODELS = {"src.models.small_cnn.SmallCNN": ("model.widths=[8,16,32]",)}
# small_cnn's, for the template's own tests of engine guarantees (a copy does not carry them):
# they run the template's default model; the copied suite uses tiny_model()
NARROW_MODEL = TINY_MODELS["src.models.small_cnn.SmallCNN"][0]


def compose_config(demo_dir: Path, output_dir: Path, *overrides: str) -> DictConfig:
    """conf/config.yaml with `overrides`, pointed at the demo set `demo_dir` and writing to
    `output_dir`, in batches of 16 loaded in the main process."""
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        return compose(
            config_name="config",
            overrides=[
                f"paths.demo_dir={demo_dir}",
                f"paths.output_dir={output_dir}",
                "loader.batch_size=16",
                "loader.num_workers=0",
                *overrides,
            ],
        )


@functools.cache
def default_model(demo_dir: Path) -> str:
    """The _target_ of the model conf/config.yaml chooses (the project's own default)."""
    return str(compose_config(demo_dir, demo_dir / "unused").model.get("_target_", ""))


def tiny_model(demo_dir: Path) -> tuple[str, ...]:
    """The overrides that make the project's default model tiny (TINY_MODELS), or none."""
    return TINY_MODELS.get(default_model(demo_dir), ())


@pytest.fixture
def make_cfg(demo_dir: Path, tmp_path: Path) -> Callable[..., DictConfig]:
    """Compose conf/config.yaml with `overrides`, pointed at the tiny demo set and tmp_path."""

    def _compose(*overrides: str) -> DictConfig:
        keys = {o.lstrip("+~").partition("=")[0] for o in overrides}
        picked = any(key == "model" or key.startswith(("model.", "experiment")) for key in keys)
        tiny = () if picked else tiny_model(demo_dir)
        return compose_config(demo_dir, tmp_path / "run", *tiny, *overrides)

    return _compose
