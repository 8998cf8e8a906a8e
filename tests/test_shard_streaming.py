"""Training through dataset=iterable on shards streamed over HTTP (a real server on loopback):
the same results as from local files through broken connections, a server that stays down
failing naming the URL and the byte reached, a mid-epoch resume equal to the uninterrupted run.
The stream itself (Range-less servers, the manifest at start-up, ranks and workers, `pipe:` and
fsspec, gzip, skipped bad samples) is the engine's suite's (engine/tests/test_remote_shards.py;
shards without a manifest: tests/test_shard_counting.py)."""

from __future__ import annotations

import re
import signal
from pathlib import Path

import pytest
import torch

from engine.core.failures import one_line
from engine.data.shards import ShardError
from engine_dev.api import load_checkpoint
from engine_dev.shard_server import DEMO_TRAIN, DEMO_VAL, Faults, demo_stream, serving
from src.loop import train
from src.step import TrainStep

TRAIN, VAL = DEMO_TRAIN, DEMO_VAL


def _cfg(make_cfg, where: str, out: Path, *overrides: str):
    shards = (f'dataset.train_shards="{where}/{TRAIN}"', f'dataset.val_shards="{where}/{VAL}"')
    network = ("dataset.backoff=0.01", "dataset.retries=2")
    run = ("trainer.max_epochs=2", "loader.num_workers=2", f"paths.output_dir={out}")
    return make_cfg("dataset=iterable", *shards, *network, *run, *overrides)


def test_training_over_http_through_broken_connections_equals_local(make_cfg, wds_dir, tmp_path):
    local = train(_cfg(make_cfg, str(wds_dir), tmp_path / "local"))
    faults = Faults(cut=20_000)  # every shard's first answer breaks off after 20,000 bytes
    with serving(wds_dir, faults) as url:
        remote = train(_cfg(make_cfg, url, tmp_path / "remote"))
    assert remote["val/acc"] == local["val/acc"]
    assert remote["train/loss"] == pytest.approx(local["train/loss"], abs=1e-6)
    continued = [r for r in faults.requests if r[1] is not None]
    assert continued and all(r[1] == "bytes=20000-" for r in continued)


def test_a_server_that_stays_down_fails_naming_the_url_and_the_byte(make_cfg, wds_dir, tmp_path):
    with serving(wds_dir, Faults(cut=5000, down=True)) as url:
        with pytest.raises(ShardError) as caught:
            list(demo_stream(url, shuffle_buffer=1))
        assert re.fullmatch(
            rf"{url}/train-00000\d\.tar\.gz: network error at byte 5,000 after 2 retries "
            r"\(HTTPError: HTTP Error 503: .*\); check that the server is up.*dataset\.backoff\.",
            str(caught.value),
        )
        with pytest.raises(ShardError) as in_a_worker:
            train(_cfg(make_cfg, url, tmp_path / "run"))
    line = one_line(in_a_worker.value)
    named = rf"ShardError: {url}/(train|val)-00000\d\.tar\.gz: network error at byte [\d,]+ after"
    assert re.match(named, line), line
    with pytest.raises(ValueError, match=rf"cannot read the manifest .*{url}/shards\.json"):
        demo_stream(url)  # the server is gone: connection refused, retried, then named


def test_resume_mid_epoch_over_http_equals_the_uninterrupted_run(
    make_cfg, wds_dir, tmp_path, monkeypatch
) -> None:
    original = TrainStep.optimizer_step

    def stop_at_step_5(self: TrainStep) -> None:  # epoch 2 of 3 batches, after its second
        original(self)
        if self.steps == 5:
            signal.raise_signal(signal.SIGTERM)

    run = (f"paths.log_dir={tmp_path}",)
    with serving(wds_dir) as url:
        whole = train(_cfg(make_cfg, url, tmp_path / "a", *run))
        monkeypatch.setattr(TrainStep, "optimizer_step", stop_at_step_5)
        with pytest.raises(SystemExit):
            train(_cfg(make_cfg, url, tmp_path / "b", *run))
        monkeypatch.undo()
        resumed = train(_cfg(make_cfg, url, tmp_path / "c", *run, "trainer.resume=auto"))
    assert load_checkpoint(tmp_path / "b" / "checkpoints" / "last.pt")["batches_done"] == 2
    a, c = (load_checkpoint(tmp_path / d / "checkpoints" / "last.pt")["model"] for d in "ac")
    assert all(torch.allclose(a[k], c[k], atol=1e-6) for k in a)
    assert resumed["val/acc"] == whole["val/acc"]
