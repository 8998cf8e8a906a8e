"""paths.data_dir per machine: a DATA_DIR environment variable, or a git-ignored
conf/local/default.yaml (`optional local: default` in config.yaml's defaults)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir
from omegaconf import DictConfig

from tests.conftest import CONF_DIR

ROOT = CONF_DIR.parent


def _paths(*overrides: str) -> DictConfig:
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        return compose(config_name="config", overrides=["paths.root_dir=/checkout", *overrides])


def test_data_dir_is_data_in_the_checkout_by_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("DATA_DIR", raising=False)
    cfg = _paths()
    assert cfg.paths.data_dir == "/checkout/data"


def test_data_dir_comes_from_DATA_DIR_when_set(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DATA_DIR", "/scratch/datasets")
    cfg = _paths()
    assert cfg.paths.data_dir == "/scratch/datasets"
    assert cfg.paths.demo_dir == "/scratch/datasets/demo"  # what follows from it, follows
    assert _paths("paths.data_dir=/given").paths.data_dir == "/given"  # the command line wins


def test_a_local_default_yaml_sets_this_machines_paths(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # conf/local/default.yaml on the search path, as a copy of conf/local/example.yaml would be
    (tmp_path / "local").mkdir()
    (tmp_path / "local" / "default.yaml").write_text(
        (CONF_DIR / "local" / "example.yaml").read_text().replace("/mnt/datasets", "/nfs/data")
    )
    searched = f"hydra.searchpath=[pkg://engine.conf,file://{tmp_path}]"
    monkeypatch.delenv("DATA_DIR", raising=False)
    assert _paths(searched).paths.data_dir == "/nfs/data"
    monkeypatch.setenv("DATA_DIR", "/scratch/datasets")  # the example lets DATA_DIR win
    assert _paths(searched).paths.data_dir == "/scratch/datasets"


def test_conf_local_default_yaml_is_git_ignored(tmp_path: Path) -> None:
    """The project's .gitignore, read by git in a repository of its own (a fresh copy of the
    template is no git checkout until `git init`)."""
    shutil.copy2(ROOT / ".gitignore", tmp_path / ".gitignore")
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)

    def ignored(path: str) -> int:
        return subprocess.run(["git", "check-ignore", "-q", path], cwd=tmp_path).returncode

    assert ignored("conf/local/default.yaml") == 0
    assert ignored("conf/local/example.yaml") == 1  # the example is committed
