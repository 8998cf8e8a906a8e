"""dataset=mix as conf/ composes it: two image folders of different sizes and class sets, mixed
0.75 / 0.25, train to each source's own accuracy; train.py runs the demo's mix; the config check
and an experiment's own sources. MixDataset's draws, orders, per-source val and refusals, built
from its classes, are the engine's suite's (engine/tests/test_mix_dataset.py)."""

from __future__ import annotations

import csv
import json
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
from omegaconf import DictConfig

from engine.config.errors import ConfigError
from engine.config.validate import validate_config
from engine.data.datasets.mix import MixDataset
from src.loop import train
from tests.cli import run_cli
from tests.conftest import tiny_model

FOLDER = "engine.data.datasets.imagefolder.ImageFolderDataset"


def test_train_mix_reaches_each_sources_own_accuracy(
    make_cfg: Callable[..., DictConfig], mix_sources: tuple[Path, Path], tmp_path: Path
) -> None:
    """A short training on the mix scores on each source's val split as training on that
    source alone does (colour-coded classes: both learn them)."""
    big, small = mix_sources
    common = ["trainer.max_epochs=8", "trainer.device=cpu", "logger=csv", "loader.batch_size=8"]
    mixed = train(  # with samples.csv: each epoch's shares, as trained on
        make_cfg(
            "dataset=mix",
            f"dataset.sources.folder.dataset.root={big}",
            "dataset@dataset.sources.listed.dataset=imagefolder",
            f"dataset.sources.listed.dataset.root={small}",
            f"paths.output_dir={tmp_path / 'mix'}",
            "trainer.record_samples=true",
            *common,
        )
    )
    alone = {
        name: train(
            make_cfg(
                "dataset=imagefolder",
                f"dataset.root={root}",
                f"paths.output_dir={tmp_path / name}",
                *common,
            )
        )["val/acc"]
        for name, root in (("folder", big), ("listed", small))
    }
    assert {"val/folder/acc", "val/folder/loss", "val/listed/acc", "val/listed/loss"} <= set(mixed)
    for name, acc in alone.items():
        assert acc >= 0.9 and mixed[f"val/{name}/acc"] >= 0.9
    epochs: dict[int, list[tuple[str, int]]] = {}
    with open(tmp_path / "mix" / "samples.csv", newline="") as f:  # trainer.record_samples
        for row in csv.DictReader(f):
            epochs.setdefault(int(row["epoch"]), []).append((row["source"], int(row["index"])))
    assert sorted(epochs) == list(range(1, 9))
    for drawn in epochs.values():
        share = sum(source == "folder" for source, _ in drawn) / len(drawn)
        assert share == pytest.approx(0.75, abs=0.03)
        small_order = [index for source, index in drawn if source == "listed"]
        first_repeat = next(i for i, x in enumerate(small_order) if x in small_order[:i])
        assert len(set(small_order[:first_repeat])) == 26  # all of them before any again


def test_train_py_runs_the_default_mix_and_refuses_a_bad_weight(
    demo_dir: Path, tmp_path: Path
) -> None:
    """`train.py dataset=mix` (the demo's folders and CSV) through the config check and the
    loop; a weight of 0 stops it in one line naming the key."""
    common = [f"paths.demo_dir={demo_dir}", f"paths.log_dir={tmp_path}", *tiny_model(demo_dir)]
    fast = ["trainer.max_epochs=1", "loader.batch_size=16", "loader.num_workers=0", "logger=csv"]
    result = run_cli("dataset=mix", *common, *fast, cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    written = json.loads(next(tmp_path.glob("runs/*/*/metrics.json")).read_text())
    assert {"val/folder/acc", "val/listed/loss", "val/acc"} <= set(written)
    bad = run_cli("dataset=mix", "dataset.sources.listed.weight=0", *common, *fast, cwd=tmp_path)
    assert bad.returncode != 0
    assert "dataset.sources.listed.weight=0: expected a number > 0" in bad.stderr


def test_an_epoch_past_the_limit_is_refused_by_the_config_check(
    make_cfg: Callable[..., DictConfig],
) -> None:
    """dataset.epoch_samples=2**31-1 built the whole order up front and died in bad_alloc."""
    cfg = make_cfg("dataset=mix", f"dataset.epoch_samples={2**31 - 1}")
    with pytest.raises(ConfigError) as refused:
        validate_config(cfg)
    said = str(refused.value)
    assert "dataset.epoch_samples=2147483647: expected >= 1 and <= 10,000,000" in said


EXPERIMENT = """# @package _global_
defaults:
  - override /dataset: mix
dataset:
  sources:{dropped}
    a: {{weight: 1, dataset: {{_target_: {folder}, root: {big}}}}}
    b: {{weight: 1, dataset: {{_target_: {folder}, root: {small}}}}}
"""


def _experiment(tmp_path: Path, mix_sources: tuple[Path, Path], dropped: str) -> str:
    """An experiment file naming its own mix sources `a` and `b`, on Hydra's search path."""
    (tmp_path / "conf" / "experiment").mkdir(parents=True)
    text = EXPERIMENT.format(
        dropped=dropped, folder=FOLDER, big=mix_sources[0], small=mix_sources[1]
    )
    (tmp_path / "conf" / "experiment" / "mine.yaml").write_text(text)
    return f"hydra.searchpath=[pkg://engine.conf,file://{tmp_path / 'conf'}]"


def test_an_experiments_own_sources_do_not_train_beside_the_demos(
    make_cfg: Callable[..., DictConfig], mix_sources: tuple[Path, Path], tmp_path: Path
) -> None:
    """Hydra merges an experiment's `dataset.sources` into the demo's two: four sources where
    the user wrote two. Refused in one line; the experiment that drops them gets its two."""
    cfg = make_cfg(_experiment(tmp_path, mix_sources, ""), "experiment=mine")
    with pytest.raises(ValueError) as refused:
        MixDataset(split="train", sources=cfg.dataset.sources)
    said = str(refused.value)
    assert said.startswith("dataset.sources: the demo's sources ['folder', 'listed']")
    assert "beside yours ['a', 'b']" in said and "\n" not in said
    shutil.rmtree(tmp_path / "conf")
    dropped = "\n    folder: null\n    listed: null"
    cfg = make_cfg(_experiment(tmp_path, mix_sources, dropped), "experiment=mine")
    mix = MixDataset(split="train", sources=cfg.dataset.sources)
    assert [source.name for source in mix.sources] == ["a", "b"]
