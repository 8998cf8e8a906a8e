"""The engine's config groups come from the installed package (pkg://engine.conf on
conf/config.yaml's hydra.searchpath); a project's conf/ comes first on that path."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir
from omegaconf import DictConfig, OmegaConf

from tests.conftest import CONF_DIR, ENGINE_CONF_DIR

DATASETS = sorted(p.stem for p in (CONF_DIR / "dataset").glob("*.yaml"))


def _compose(conf: Path, *overrides: str) -> DictConfig:
    with initialize_config_dir(config_dir=str(conf), version_base="1.3"):
        return compose(config_name="config", overrides=["paths.output_dir=.", *overrides])


@pytest.fixture
def own_conf(tmp_path: Path) -> Path:
    """A copy of the project's conf/, to add files to."""
    return Path(shutil.copytree(CONF_DIR, tmp_path / "conf"))


def test_a_file_in_conf_replaces_the_engines_of_the_same_name(own_conf: Path) -> None:
    assert _compose(own_conf).eval.hardest == 50  # the engine's eval/default.yaml
    engine_eval = OmegaConf.load(ENGINE_CONF_DIR / "eval" / "default.yaml")
    (own_conf / "eval").mkdir()
    OmegaConf.save(
        {**OmegaConf.to_container(engine_eval), "hardest": 7}, own_conf / "eval" / "default.yaml"
    )
    cfg = _compose(own_conf)
    assert cfg.eval.hardest == 7 and cfg.eval.split == "val"  # ours, whole: Hydra's precedence


@pytest.mark.parametrize("dataset", DATASETS)
def test_every_dataset_option_has_the_fold_keys_once(dataset: str) -> None:
    node = _compose(CONF_DIR, f"dataset={dataset}").dataset
    assert (node.folds, node.fold, node.fold_seed) == (None, 0, 0)
    assert "folds" not in (CONF_DIR / "dataset" / f"{dataset}.yaml").read_text()


def test_a_dataset_yaml_of_your_own_gets_the_fold_keys_and_may_set_them(own_conf: Path) -> None:
    (own_conf / "dataset" / "mine.yaml").write_text(
        "_target_: src.datasets.mine.Mine\nroot: /data  # where\n"
    )
    (own_conf / "dataset" / "mine_3.yaml").write_text(
        "_target_: src.datasets.mine.Mine\nfolds: 3  # always three folds\n"
    )
    assert _compose(own_conf, "dataset=mine").dataset.folds is None
    assert _compose(own_conf, "dataset=mine_3").dataset.folds == 3
    assert _compose(own_conf, "dataset=mine_3", "dataset.folds=4").dataset.folds == 4


def test_the_projects_allowlist_names_only_its_own_and_the_engine_adds_its_entries() -> None:
    cfg = _compose(CONF_DIR)
    assert not [e for e in cfg.allowed_targets if e.startswith("engine.")]
    assert "engine.data.datasets.*" in cfg.allowed_targets_engine
