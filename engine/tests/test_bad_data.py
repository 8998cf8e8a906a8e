"""Unreadable images on the reference project: more than dataset.decode.max_bad_fraction stops
the run naming the key; a worker's error reaches the console in one line naming the file;
on_error=skip with workers lists exactly the bad files. (Raise naming the file, skip listing
each file once over epochs: test_reference_project.py; a resumed ledger: test_csv_cells.py;
a bad policy: test_decode_policy.py.)"""

from __future__ import annotations

import csv
import json
import re
from pathlib import Path

import pytest

from engine.data.bad_samples import REPORT_COLUMNS, BadDataError
from engine_dev.cli import run_script
from engine_dev.hostile import corrupt_tree
from reference.loop import train
from tests.conftest import TRAIN, reference_args

NAMED = r"cannot decode sample (\d+) \(class '(circle|cross|square)'\) from (\S+):"


def _report(run: Path) -> list[dict[str, str]]:
    with open(run / "bad_samples.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    assert rows and list(rows[0]) == list(REPORT_COLUMNS)
    return rows


def test_more_bad_than_max_bad_fraction_stops_naming_the_key(reference_cfg, demo_dir, tmp_path):
    root, bad = corrupt_tree(demo_dir, tmp_path / "tree")
    cfg = reference_cfg(
        "run",
        f"dataset.root={root}",
        "dataset.decode.on_error=skip",
        "dataset.decode.max_bad_fraction=0.01",
        "trainer.max_epochs=1",
    )
    with pytest.raises(
        BadDataError, match=r"of 49 train samples.*dataset\.decode\.max_bad_fraction=0\.01"
    ):
        train(cfg)
    run = Path(cfg.paths.output_dir)
    assert {r["path"] for r in _report(run)} <= bad  # written before the stop


def test_worker_reraise_keeps_the_message(demo_dir: Path, tmp_path: Path) -> None:
    root, bad = corrupt_tree(demo_dir, tmp_path / "tree")
    result = run_script(
        TRAIN,
        *reference_args(
            demo_dir,
            tmp_path,
            f"dataset.root={root}",
            "loader.num_workers=2",
            "loader.batch_size=16",
            "loader.shuffle=false",  # the dataset's own order (sampler=random unused)
            "trainer.max_epochs=1",
            f"hydra.run.dir={tmp_path / 'run'}",
        ),
        cwd=tmp_path,
    )
    assert result.returncode != 0
    assert result.stderr.count("run failed:") == 1  # said once, in one line
    log = (tmp_path / "run" / "train.log").read_text()
    assert "DataLoader worker process" in log  # the worker's traceback: in the log file only
    assert "DataLoader worker process" not in result.stderr
    named = re.search(NAMED, result.stderr)
    assert named and named.group(3) in bad and "dataset.decode.on_error=skip" in result.stderr


def test_skip_with_two_workers_reports_exactly_the_bad_files(demo_dir: Path, tmp_path: Path):
    root, bad = corrupt_tree(demo_dir, tmp_path / "tree")
    run = tmp_path / "run"
    result = run_script(
        TRAIN,
        *reference_args(
            demo_dir,
            tmp_path,
            f"dataset.root={root}",
            "dataset.decode.on_error=skip",
            "dataset.decode.max_bad_fraction=0.1",
            "loader.num_workers=2",
            "loader.batch_size=16",
            "trainer.max_epochs=1",
            f"hydra.run.dir={run}",
        ),
        cwd=tmp_path,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert sorted(r["path"] for r in _report(run)) == sorted(bad)
    assert json.loads((run / "metrics.json").read_text())["epochs"] == 1
