"""Shards streamed over HTTP (a real server on loopback) to a 2-rank torchrun job with 2 loader
workers a rank: uneven shares end aligned, workers start by forkserver, each val sample is
counted once in the job (the in-process streaming checks: tests/test_shard_streaming.py and
engine/tests/test_remote_shards.py)."""

from __future__ import annotations

import json

import pytest

from engine_dev.api import load_checkpoint
from engine_dev.shard_server import DEMO_TRAIN as TRAIN
from engine_dev.shard_server import DEMO_VAL as VAL
from engine_dev.shard_server import serving, write_demo_shards
from tests.conftest import tiny_model
from tests.process.test_distributed import single_process_eval, torchrun

# `make test-slow`: ~50 s of 2 cores (a 2-rank x 2-worker torchrun job over HTTP); the
# in-process HTTP checks run in `make test` (tests/test_shard_streaming.py,
# engine/tests/test_remote_shards.py)
pytestmark = pytest.mark.slow


def test_torchrun_over_http_validates_every_sample_once(demo_dir, tmp_path) -> None:
    """2 ranks x 2 workers streaming 3 train shards of 16 over HTTP: rank 0 reads 2, rank 1 one
    (4 vs 2 batches): Join, then align. The workers start by forkserver (forking a rank can
    hang: CPython gh-112275), said once. Val metrics equal a single-process evaluation of the
    checkpoint (each val sample counted once in the job)."""
    wds_dir = write_demo_shards(demo_dir, tmp_path / "wds")
    with serving(wds_dir) as url:
        shards = (f'dataset.train_shards="{url}/{TRAIN}"', f'dataset.val_shards="{url}/{VAL}"')
        run = (
            "trainer.max_epochs=1",
            "loader.batch_size=8",
            "loader.num_workers=2",
            *tiny_model(demo_dir),
        )
        logs = f"paths.log_dir={tmp_path}"
        result = torchrun("dataset=iterable", *shards, *run, logs, cwd=tmp_path)
        assert result.returncode == 0, result.stderr[-4000:]
        said = result.stdout + result.stderr
        assert said.count("multiprocessing_context=forkserver under torchrun") == 1  # rank 0's
        (metrics_file,) = tmp_path.glob("runs/*/*/metrics.json")
        assert load_checkpoint(metrics_file.parent / "checkpoints" / "last.pt")["step"] == 4
        alone = single_process_eval(metrics_file.parent, tmp_path / "eval")
    metrics = json.loads(metrics_file.read_text())
    assert alone["val/acc"] == metrics["val/acc"]
    assert alone["val/loss"] == pytest.approx(metrics["val/loss"], rel=1e-6)
