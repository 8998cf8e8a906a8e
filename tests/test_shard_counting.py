"""dataset=iterable over `http(s)://` shards with no manifest beside them, as the project
trains: the results equal those of the same shards read from disk. Their counting, caching
and recounting is the engine's suite's (engine/tests/test_shard_counting.py)."""

from __future__ import annotations

import shutil

import pytest

from engine_dev.shard_server import serving
from src.loop import train

TRAIN, VAL = "train-{000000..000002}.tar", "val-{000000..000001}.tar"


FAST = {"retries": 1, "backoff": 0.01, "read_timeout": 10.0}


def test_training_from_uncounted_shards_equals_training_from_disk(make_cfg, bare_shards, tmp_path):
    local = tmp_path / "local"
    shutil.copytree(bare_shards, local)

    def run(where: str, name: str) -> dict:
        shards = (f'dataset.train_shards="{where}/{TRAIN}"', f'dataset.val_shards="{where}/{VAL}"')
        cache = f"dataset.manifest_cache={tmp_path / 'cache'}"
        out = f"paths.output_dir={tmp_path / name}"
        return train(make_cfg("dataset=iterable", *shards, cache, out, "trainer.max_epochs=1"))

    from_disk = run(str(local), "local")
    with serving(bare_shards) as url:
        streamed = run(url, "remote")
    assert streamed["val/acc"] == from_disk["val/acc"]
    assert streamed["train/loss"] == pytest.approx(from_disk["train/loss"], abs=1e-6)
