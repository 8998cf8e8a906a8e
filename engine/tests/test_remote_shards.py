"""Shards streamed over HTTP (a real server on loopback), from `pipe:` and fsspec, built as the
engine's TarShardDataset: the same samples as from local files, through a server without Range
requests, once each over two ranks of two workers; start-up reads only the manifest; a failing
pipe command is retried then named; gzip is told by the bytes; on_error=skip leaves bad samples
and a broken shard out and lists them, up to max_bad_fraction; the network settings do not
change which run resume=auto continues. Training through dataset=iterable over HTTP (broken
connections, a server that stays down, a mid-epoch resume) is the template's
(tests/test_shard_streaming.py)."""

from __future__ import annotations

import csv
import io
import json
import re
import tarfile
from pathlib import Path

import pytest
from torch.utils.data import DataLoader
from torchvision.transforms import v2

from engine.data.bad_samples import BadDataError
from engine.data.datasets.tar_shards import TarShardDataset
from engine.data.decode_policy import DecodePolicy
from engine.data.loaders import make_loader
from engine.data.shards import ShardError
from engine.data.shards.manifest import main as write_manifest
from engine.runs.resume import config_key
from engine_dev.shard_server import DEMO_TRAIN, DEMO_VAL, FAST, Faults, demo_stream, serving
from engine_dev.small_sets import loader_settings

TRAIN, VAL = DEMO_TRAIN, DEMO_VAL


def _samples(data: TarShardDataset, workers: int = 0) -> list[tuple[bytes, int]]:
    loader = DataLoader(data, batch_size=None, num_workers=workers)
    return sorted((x.numpy().tobytes(), int(y)) for x, y in loader)


def test_a_server_without_range_requests_is_read_again_up_to_the_break(wds_dir) -> None:
    with serving(wds_dir, Faults(cut=9000, ranges=False)) as url:
        assert _samples(demo_stream(url), workers=2) == _samples(demo_stream(str(wds_dir)))


def test_start_up_reads_only_the_manifest(wds_dir) -> None:
    faults = Faults()
    with serving(wds_dir, faults) as url:
        data = demo_stream(url, "val")
    assert [path for path, _ in faults.requests] == ["/shards.json"]
    assert len(data) == 30 and data.shard_sizes == [16, 14]


def test_two_ranks_of_two_workers_read_each_remote_sample_once(wds_dir) -> None:
    whole = _samples(demo_stream(str(wds_dir)))
    with serving(wds_dir) as url:
        read = []
        for rank in range(2):
            data = demo_stream(url)
            data.distribute(rank, 2)
            read += _samples(data, workers=2)
    assert sorted(read) == whole


def test_pipe_and_fsspec_sources_read_the_same_samples(wds_dir, tmp_path, capsys) -> None:
    local = _samples(demo_stream(str(wds_dir)))
    assert _samples(demo_stream(f"file://{wds_dir}")) == local  # fsspec, manifest beside
    pattern = f"pipe:cat {wds_dir}/{TRAIN}"
    manifest = tmp_path / "pipes.json"
    write_manifest([pattern, "--out", str(manifest)])
    assert "train-000002.tar.gz: 16 samples" in capsys.readouterr().out
    pipes = TarShardDataset("train", pattern, "unused", manifest=str(manifest), **FAST)
    assert _samples(pipes, workers=2) == local
    with pytest.raises(ValueError, match=r"dataset\.train_shards: pipe: sources have no folder"):
        TarShardDataset("train", pattern, "unused")


def test_a_failing_pipe_command_is_retried_then_named(tmp_path) -> None:
    manifest = tmp_path / "m.json"
    entry = {"samples": 1, "labels": [0], "label_from": "cls", "errors": []}
    manifest.write_text(
        json.dumps({"format": "tar-shards", "version": 1, "shards": {"pipe:exit 3": entry}})
    )
    data = TarShardDataset("train", "pipe:exit 3", "unused", manifest=str(manifest), **FAST)
    with pytest.raises(ShardError, match=r"^pipe:exit 3: network error at byte 0 after 2 ret"):
        list(data)


def test_gzip_shards_are_told_by_their_bytes(wds_dir, tmp_path) -> None:
    renamed = tmp_path / "x-000000.tar"  # a gzip-compressed shard named like a plain tar
    renamed.write_bytes((wds_dir / "val-000001.tar.gz").read_bytes())
    data = TarShardDataset("val", "unused", str(renamed))
    assert len(data) == 14 and len(_samples(data)) == 14


def _members(shard: Path) -> list[tuple[str, bytes]]:
    with tarfile.open(shard) as tar:
        return [(m.name, tar.extractfile(m).read()) for m in tar]  # type: ignore[union-attr]


def _write(path: Path, members: list[tuple[str, bytes]]) -> Path:
    with tarfile.open(path, "w") as tar:
        for name, data in members:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return path


@pytest.fixture
def faulty_shards(demo_dir: Path, tmp_path: Path) -> Path:
    """Three shards of the demo's first 16 samples and their manifest: one intact; one with an
    undecodable image, a sample without a label and a member of an unknown extension (3 more
    samples); one cut in its 6th sample's .cls after the manifest was written."""
    good = _members(demo_dir / "shards" / "train-000000.tar")
    _write(tmp_path / "s-000000.tar", good)
    bad = [("x1.jpg", b"\xff\xd8 not a jpeg"), ("x1.cls", b"0"), ("x2.jpg", good[0][1])]
    _write(tmp_path / "s-000001.tar", good[:6] + bad + [("x3.txt", b"?")] + good[6:])
    cut = _write(tmp_path / "s-000002.tar", good)
    write_manifest([f"{tmp_path}/s-*.tar", "--out", str(tmp_path / "shards.json")])
    with tarfile.open(cut) as tar:
        at_6th_cls = tar.getmembers()[11].offset_data
    cut.write_bytes(cut.read_bytes()[:at_6th_cls])
    return tmp_path


def _skipping(url: str, report: Path, fraction: float) -> DataLoader:
    skip = {"decode": DecodePolicy("skip", fraction), "skip_bad_shards": True}
    shards = f"{url}/s-{{000000..000002}}.tar"
    data = TarShardDataset("train", shards, "unused", shuffle_buffer=1, **skip, **FAST)
    data.transform = v2.Resize((16, 16))  # batches need equal sizes
    settings = loader_settings(4, 2, prefetch_factor=2)
    return make_loader(data, settings, None, False, "train", report)


def test_skip_leaves_bad_samples_and_a_broken_shard_out_and_lists_them(faulty_shards, tmp_path):
    with serving(faulty_shards) as url:
        loader = _skipping(url, tmp_path / "run", 0.5)
        assert sum(len(labels) for _, labels in loader) == 16 + 16 + 5
    assert loader.bad_samples.count == 3 + 11  # three bad samples, the cut shard's 11 unread
    with open(tmp_path / "run" / "bad_samples.csv", newline="") as f:
        rows = {row["path"].rpartition("/")[2]: row["error"] for row in csv.DictReader(f)}
    bad = ("s-000001.tar::x1.jpg", "s-000001.tar::x2.jpg", "s-000001.tar::x3.txt")
    assert sorted(rows) == [*bad, "s-000002.tar"]
    assert "a sample without a label" in rows["s-000001.tar::x2.jpg"]
    assert "extension 'txt' fits no sample rule" in rows["s-000001.tar::x3.txt"]
    cut = r"11 samples left out: not a readable tar shard after member \S+\.cls \(ReadError"
    assert re.match(cut, rows["s-000002.tar"])


def test_skip_stops_past_max_bad_fraction(faulty_shards, tmp_path) -> None:
    with serving(faulty_shards) as url, pytest.raises(BadDataError, match=r"of 51 train samp"):
        list(_skipping(url, tmp_path / "run", 0.1))


def test_without_skip_a_fault_the_manifest_knows_stops_the_start_naming_it(faulty_shards) -> None:
    pattern = f"{faulty_shards}/s-*.tar"  # local: the cut shard is read again (size changed)
    with pytest.raises(ShardError, match=r"s-000001\.tar::x2\.jpg: a sample without a label"):
        TarShardDataset("train", pattern, "unused")
    with pytest.raises(ShardError, match=r"s-000002\.tar: not a readable tar shard after"):
        TarShardDataset("train", pattern, "unused", decode=DecodePolicy(on_error="skip"))


def test_network_settings_do_not_change_which_run_resume_auto_continues() -> None:
    stream = {"train_shards": "http://h/t-{0..9}.tar", "retries": 3, "backoff": 1.0}
    patient = stream | {"retries": 9, "backoff": 0.1, "read_timeout": 600}
    assert config_key({"dataset": stream}) == config_key({"dataset": patient})
