"""Unreadable images: on_error=raise stops naming the file; skip trains on, reports, bounds."""

from __future__ import annotations

import csv
import json
import logging
import re
from pathlib import Path

import pytest

from engine.api import DecodePolicy
from engine.data.bad_samples import REPORT_COLUMNS, BadDataError, BadSample, BadSampleLedger
from engine.data.decode import SampleError
from engine_dev.hostile import corrupt_tree
from src.loop import train
from tests.cli import run_cli
from tests.conftest import NARROW_MODEL

NAMED = r"cannot decode sample (\d+) \(class '(circle|cross|square)'\) from (\S+):"


def _report(run: Path) -> list[dict[str, str]]:
    with open(run / "bad_samples.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    assert rows and list(rows[0]) == list(REPORT_COLUMNS)
    return rows


def test_raise_names_the_file_its_index_class_and_the_option(make_cfg, demo_dir, tmp_path):
    root, bad = corrupt_tree(demo_dir, tmp_path / "tree")
    cfg = make_cfg(f"dataset.root={root}", "trainer.max_epochs=1")
    with pytest.raises(SampleError) as caught:
        train(cfg)
    message = str(caught.value)
    named = re.search(NAMED, message)
    assert named and named.group(3) in bad
    assert re.search(r"truncated|empty \(0 bytes\)|Unsupported image file", message)
    assert "dataset.decode.on_error=skip" in message


def test_skip_trains_to_the_end_and_lists_each_bad_file_once(make_cfg, demo_dir, tmp_path, caplog):
    root, bad = corrupt_tree(demo_dir, tmp_path / "tree")
    cfg = make_cfg(
        f"dataset.root={root}",
        "dataset.decode.on_error=skip",
        "dataset.decode.max_bad_fraction=0.1",
        "trainer.max_epochs=2",
    )
    with caplog.at_level(logging.WARNING, logger="engine.data.bad_samples"):
        metrics = train(cfg)
    assert metrics["epochs"] == 2
    rows = _report(Path(cfg.paths.output_dir))
    assert sorted(r["path"] for r in rows) == sorted(bad)  # each once, across both epochs
    assert {r["split"] for r in rows} == {"train"} and all(r["error"] for r in rows)
    warned = [r.getMessage() for r in caplog.records if "left out" in r.getMessage()]
    assert len(warned) == 3 and all(any(p in w for p in bad) for w in warned)


def test_more_bad_than_max_bad_fraction_stops_naming_the_key(make_cfg, demo_dir, tmp_path):
    root, bad = corrupt_tree(demo_dir, tmp_path / "tree")
    cfg = make_cfg(f"dataset.root={root}", "dataset.decode.on_error=skip", "trainer.max_epochs=1")
    with pytest.raises(
        BadDataError, match=r"of 49 train samples.*dataset\.decode\.max_bad_fraction=0\.01"
    ):
        train(cfg)
    run = Path(cfg.paths.output_dir)
    assert {r["path"] for r in _report(run)} <= bad  # written before the stop


@pytest.mark.parametrize(
    ("kwargs", "key"),
    [
        ({"on_error": "ignore"}, "dataset.decode.on_error"),
        ({"max_bad_fraction": 1.5}, "dataset.decode.max_bad_fraction"),
    ],
)
def test_invalid_policy_names_the_key(kwargs: dict, key: str) -> None:
    with pytest.raises(ValueError, match=re.escape(key)):
        DecodePolicy(**kwargs)


def test_worker_reraise_keeps_the_message(demo_dir: Path, tmp_path: Path) -> None:
    root, bad = corrupt_tree(demo_dir, tmp_path / "tree")
    result = run_cli(
        f"dataset.root={root}",
        "loader.num_workers=2",
        "loader.batch_size=16",
        "sampler=sequential",
        "loader.shuffle=false",
        "trainer.max_epochs=1",
        NARROW_MODEL,
        f"hydra.run.dir={tmp_path / 'run'}",
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
    result = run_cli(
        f"dataset.root={root}",
        "dataset.decode.on_error=skip",
        "dataset.decode.max_bad_fraction=0.1",
        "loader.num_workers=2",
        "loader.batch_size=16",
        "trainer.max_epochs=1",
        NARROW_MODEL,
        f"hydra.run.dir={run}",
        cwd=tmp_path,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert sorted(r["path"] for r in _report(run)) == sorted(bad)
    assert json.loads((run / "metrics.json").read_text())["epochs"] == 1


def test_a_resumed_run_does_not_list_a_file_twice(tmp_path: Path) -> None:
    report = tmp_path / "bad_samples.csv"
    bad = BadSample(7, "/x/7.jpg", "cat", "the file is empty (0 bytes)")
    for _ in range(2):  # the first run, then a run resumed in the same directory
        BadSampleLedger("train", 100, 0.5, report).record([bad])
    BadSampleLedger("val", 100, 0.5, report).record([bad])  # another split: its own row
    rows = _report(tmp_path)
    assert [(r["split"], r["index"]) for r in rows] == [("train", "7"), ("val", "7")]
