"""Shards streamed over HTTP (a real server on loopback) to a 2-rank torchrun job: each val
sample counted once in the job (the in-process streaming checks: tests/test_shard_streaming.py)."""

from __future__ import annotations

import json

import pytest

from engine_dev.shard_server import serving
from tests.conftest import NARROW_MODEL
from tests.process.test_distributed import single_process_eval, torchrun
from tests.test_shard_streaming import TRAIN, VAL, _write_wds


def test_torchrun_over_http_validates_every_sample_once(demo_dir, tmp_path) -> None:
    """2 ranks x 2 workers streaming over HTTP: val metrics equal a single-process evaluation
    of the checkpoint (each val sample counted once in the job)."""
    wds_dir = _write_wds(demo_dir, tmp_path / "wds")
    with serving(wds_dir) as url:
        shards = (f'dataset.train_shards="{url}/{TRAIN}"', f'dataset.val_shards="{url}/{VAL}"')
        run = ("trainer.max_epochs=1", "loader.batch_size=8", "loader.num_workers=2", NARROW_MODEL)
        logs = f"paths.log_dir={tmp_path}"
        result = torchrun("dataset=iterable", *shards, *run, logs, cwd=tmp_path)
        assert result.returncode == 0, result.stderr[-4000:]
        (metrics_file,) = tmp_path.glob("runs/*/*/metrics.json")
        alone = single_process_eval(metrics_file.parent, tmp_path / "eval")
    metrics = json.loads(metrics_file.read_text())
    assert alone["val/acc"] == metrics["val/acc"]
    assert alone["val/loss"] == pytest.approx(metrics["val/loss"], rel=1e-6)
