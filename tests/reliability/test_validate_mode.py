"""mode=validate decodes every file once, reports the unreadable ones and trains nothing."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from engine.metric_keys import METRICS_BY_MODE
from engine.modes.validate import validate
from engine_dev.hostile import corrupt_tree
from tests.cli import run_cli


def _reported(run: Path) -> list[str]:
    with open(run / "bad_samples.csv", newline="") as f:
        return sorted(row["path"] for row in csv.DictReader(f))


def test_validate_lists_exactly_the_bad_files_and_trains_nothing(make_cfg, demo_dir, tmp_path):
    root, bad = corrupt_tree(demo_dir, tmp_path / "tree")
    cfg = make_cfg("mode=validate", f"dataset.root={root}", "dataset.max_bad_fraction=0.1")
    metrics = validate(cfg)
    run = Path(cfg.paths.output_dir)
    assert _reported(run) == sorted(bad)
    assert metrics["validate/samples"] == 49 + 30 and metrics["validate/bad"] == 3
    assert metrics["validate/bad_frac"] == pytest.approx(3 / 79)
    assert json.loads((run / "metrics.json").read_text()) == pytest.approx(metrics)
    assert set(metrics) == set(METRICS_BY_MODE["validate"])
    assert not (run / "checkpoints").exists() and not (run / "tensorboard").exists()


def test_validate_refuses_datasets_without_files(make_cfg) -> None:
    with pytest.raises(ValueError, match=r"mode=validate checks image files.*dataset=imagefolder"):
        validate(make_cfg("mode=validate", "dataset=tensor", "transforms=none", "model=mlp"))


def test_validate_exits_non_zero_past_max_bad_fraction(demo_dir: Path, tmp_path: Path) -> None:
    root, bad = corrupt_tree(demo_dir, tmp_path / "tree")
    run = tmp_path / "run"
    result = run_cli(
        "mode=validate",
        f"dataset.root={root}",
        "loader.num_workers=2",
        f"hydra.run.dir={run}",
        cwd=tmp_path,
    )
    assert result.returncode != 0
    assert "3 of 49 train samples are unreadable" in result.stderr
    assert "dataset.max_bad_fraction=0.01" in result.stderr
    assert _reported(run) == sorted(bad)  # the report is written before the exit
    assert json.loads((run / "metrics.json").read_text())["validate/bad"] == 3
    assert not (run / "checkpoints").exists()
