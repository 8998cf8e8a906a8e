"""mode=inspect: the report, the grids, and warnings firing on deliberately wrong setups."""

from __future__ import annotations

import json
import logging
import shutil
from pathlib import Path

import pytest
from omegaconf import open_dict

from engine.modes.inspect import inspect

TO_FLOAT = {"_target_": "torchvision.transforms.v2.ConvertImageDtype"}  # uint8 -> [0, 1] float
NORMALIZE = {"_target_": "torchvision.transforms.v2.Normalize", "mean": [0.5] * 3, "std": [0.2] * 3}


def _warnings(cfg) -> list[str]:
    metrics = inspect(cfg)
    report = json.loads((Path(cfg.paths.output_dir) / "inspect.json").read_text())
    assert metrics["inspect/warnings"] == len(report["warnings"])
    return report["warnings"]


def test_clean_setup_reports_and_draws_without_warnings(make_cfg, caplog) -> None:
    cfg = make_cfg("mode=inspect", "inspect.batches=2")
    with caplog.at_level(logging.INFO, logger="engine.modes.inspect"):
        assert _warnings(cfg) == []
    out = Path(cfg.paths.output_dir)
    report = json.loads((out / "inspect.json").read_text())["splits"]
    assert report["train"]["batch_shape"] == [16, 3, 48, 48]
    assert report["train"]["loader"]["sampler"] == "RandomOrder"
    assert abs(report["val"]["channel_mean"][0]) < 1.0 < report["val"]["channel_std"][0] * 2
    assert (out / "inspect_train.png").stat().st_size > 0 and (out / "inspect_val.png").exists()
    assert "labels: circle" in caplog.text


@pytest.mark.parametrize(
    ("overrides", "edit", "expected"),
    [
        (["sampler=sequential", "loader.shuffle=false"], None, "label order"),
        (["dataset=tensor", "transforms=none"], None, "raw [0, 1] pixels"),
        ([], lambda t: t.train.extend([TO_FLOAT, NORMALIZE]), "applied twice"),
        ([], lambda t: t.__setattr__("val", t.train), "transforms.val is random"),
    ],
)
def test_classic_mistakes_are_flagged(make_cfg, overrides, edit, expected: str) -> None:
    cfg = make_cfg("mode=inspect", "inspect.batches=1", *overrides)
    if edit is not None:
        with open_dict(cfg):
            edit(cfg.transforms)
    found = _warnings(cfg)
    assert any(expected in w for w in found), found


def test_class_missing_from_val_is_flagged(make_cfg, demo_dir: Path, tmp_path: Path) -> None:
    root = tmp_path / "tree"
    shutil.copytree(demo_dir / "imagefolder", root)
    shutil.rmtree(root / "val" / "star")
    cfg = make_cfg("mode=inspect", "inspect.batches=1", f"dataset.root={root}")
    assert any("['star'] have no val samples" in w for w in _warnings(cfg))
