"""mode=validate on the reference project decodes every file once, reports the unreadable ones
and trains nothing; past max_bad_fraction it exits non-zero after writing the report; with
workers a bad first file is listed too, and a stalled worker is named with its file. (A
dataset without image files is refused: the template proves it on its dataset=tensor.)"""

from __future__ import annotations

import csv
import json
import time
from pathlib import Path

import pytest

from engine.data.datasets import image_files
from engine.metric_keys import METRICS_BY_MODE
from engine.modes.validate import validate
from engine_dev.cli import run_script
from engine_dev.hostile import corrupt_tree
from tests.conftest import TRAIN, reference_args


def _reported(run: Path) -> list[str]:
    with open(run / "bad_samples.csv", newline="") as f:
        return sorted(row["path"] for row in csv.DictReader(f))


def test_validate_lists_exactly_the_bad_files_and_trains_nothing(reference_cfg, demo_dir, tmp_path):
    root, bad = corrupt_tree(demo_dir, tmp_path / "tree")
    cfg = reference_cfg(
        "run", "mode=validate", f"dataset.root={root}", "dataset.decode.max_bad_fraction=0.1"
    )
    metrics = validate(cfg)
    run = Path(cfg.paths.output_dir)
    assert _reported(run) == sorted(bad)
    assert metrics["validate/samples"] == 49 + 30 and metrics["validate/bad"] == 3
    assert metrics["validate/bad_frac"] == pytest.approx(3 / 79)
    assert json.loads((run / "metrics.json").read_text()) == pytest.approx(metrics)
    assert set(metrics) == set(METRICS_BY_MODE["validate"])
    assert not (run / "checkpoints").exists() and not (run / "tensorboard").exists()


def test_validate_exits_non_zero_past_max_bad_fraction(demo_dir: Path, tmp_path: Path) -> None:
    root, bad = corrupt_tree(demo_dir, tmp_path / "tree")
    run = tmp_path / "run"
    args = reference_args(
        demo_dir,
        tmp_path,
        "mode=validate",
        f"dataset.root={root}",
        "dataset.decode.max_bad_fraction=0.01",
        "loader.num_workers=2",
        f"hydra.run.dir={run}",
    )
    result = run_script(TRAIN, *args, cwd=tmp_path)
    assert result.returncode != 0
    assert "3 of 49 train samples are unreadable" in result.stderr
    assert "dataset.decode.max_bad_fraction=0.01" in result.stderr
    assert _reported(run) == sorted(bad)  # the report is written before the exit
    assert json.loads((run / "metrics.json").read_text())["validate/bad"] == 3
    assert not (run / "checkpoints").exists()


def test_validate_with_workers_lists_every_bad_file_a_bad_first_one_included(
    reference_cfg, demo_dir, tmp_path
) -> None:
    """Sizing the batches for the host-limit check once decoded sample 0 in the main process:
    a bad first file stopped the scan before it listed any."""
    root, bad = corrupt_tree(demo_dir, tmp_path / "tree")
    first = root / "train" / "circle" / "000_empty.jpg"  # sorts first: sample 0
    first.write_bytes(b"")
    cfg = reference_cfg(
        "run",
        "mode=validate",
        f"dataset.root={root}",
        "dataset.decode.max_bad_fraction=0.2",
        "loader.num_workers=2",
    )
    metrics = validate(cfg)
    assert _reported(Path(cfg.paths.output_dir)) == sorted({*bad, str(first)})
    assert metrics["validate/bad"] == 4


def test_validate_names_the_file_a_stalled_worker_was_reading(
    reference_cfg, demo_dir, tmp_path, monkeypatch
) -> None:
    root, _ = corrupt_tree(demo_dir, tmp_path / "tree")
    stuck = sorted((root / "train" / "square").glob("*.jpg"))[0]
    real_load = image_files.load_sample

    def blocking_read(path: str, *args, **kwargs):
        if path == str(stuck):
            time.sleep(3)  # a read on a hung mount (a forked worker inherits this patch)
        return real_load(path, *args, **kwargs)

    monkeypatch.setattr(image_files, "load_sample", blocking_read)
    cfg = reference_cfg(
        "run",
        "mode=validate",
        f"dataset.root={root}",
        "loader.num_workers=1",
        "loader.multiprocessing_context=fork",
        "loader.timeout=1",
    )
    with pytest.raises(RuntimeError, match=r"DataLoader timed out after 1 seconds while ") as err:
        validate(cfg)
    assert f"({stuck})" in str(err.value) and "raise loader.timeout" in str(err.value)
