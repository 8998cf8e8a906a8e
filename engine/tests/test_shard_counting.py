"""`http(s)://` shards with no manifest beside them (webdataset's ShardWriter output on a web
server): counted once at start-up, their manifest cached and reused while each shard's size and
ETag hold, counted again (saying why) when they change; the samples and training results are
those of the same shards read from disk (the training on them: the template's
tests/test_shard_counting.py)."""

from __future__ import annotations

import logging
import re
import shutil
from pathlib import Path

import pytest
from torch.utils.data import DataLoader

from engine.data.datasets.tar_shards import TarShardDataset
from engine.data.decode_policy import DecodePolicy
from engine.data.shards import ShardError, tally
from engine_dev.shard_server import Faults, serving

TRAIN, VAL = "train-{000000..000002}.tar", "val-{000000..000001}.tar"


FAST = {"retries": 1, "backoff": 0.01, "read_timeout": 10.0}


def _dataset(where: str, cache: Path | None, split: str = "train", **kwargs) -> TarShardDataset:
    shards = (f"{where}/{TRAIN}", f"{where}/{VAL}")
    return TarShardDataset(split, *shards, manifest_cache=cache and str(cache), **FAST | kwargs)


def _samples(data: TarShardDataset) -> list[tuple[bytes, int]]:
    return sorted((x.numpy().tobytes(), int(y)) for x, y in DataLoader(data, batch_size=None))


def _shard_gets(faults: Faults) -> list[str]:
    return [path for path, _ in faults.requests if path.endswith(".tar")]


def test_counted_once_cached_then_read_from_the_cache(bare_shards, tmp_path, caplog) -> None:
    local = tmp_path / "local"  # a copy on disk, read at each start (no manifest_cache)
    shutil.copytree(bare_shards, local)
    cache, faults = tmp_path / "cache", Faults()
    with serving(bare_shards, faults) as url, caplog.at_level(logging.INFO):
        first = _dataset(url, cache)
        assert sorted(_shard_gets(faults)) == [f"/train-00000{i}.tar" for i in range(3)]
        assert _samples(first) == _samples(_dataset(str(local), None))
        del faults.requests[:], faults.heads[:]
        again = _dataset(url, cache)
    assert first.shard_sizes == again.shard_sizes == [16, 16, 16]
    assert again.classes == ["0", "1", "2", "3", "4"]  # inferred from the counted labels
    (cached,) = cache.iterdir()
    said = f"counted 3 shards (48 samples) from {url}/; cached the manifest in {cached}; next "
    assert f"{said}start reads it" in caplog.messages
    assert [path for path, _ in faults.requests] == ["/shards.json"]  # 404, then HEADs only
    assert sorted(faults.heads) == [f"/train-00000{i}.tar" for i in range(3)]
    assert caplog.messages[-1].startswith(f"read the counts of 3 shards of {url}/ from {cached}")


def test_a_shard_changed_on_the_server_is_counted_again_saying_why(bare_shards, tmp_path, caplog):
    cache, faults = tmp_path / "cache", Faults()
    with serving(bare_shards, faults) as url:
        _dataset(url, cache)
        shrunk = bare_shards / "train-000001.tar"
        size = shrunk.stat().st_size
        shutil.copyfile(bare_shards / "val-000001.tar", shrunk)  # 14 samples where 16 were
        del faults.requests[:]
        with caplog.at_level(logging.INFO):
            data = _dataset(url, cache)
    assert data.shard_sizes == [16, 14, 16]
    assert _shard_gets(faults) == ["/train-000001.tar"]
    why = f"{url}/train-000001.tar: its size was {size}, now {shrunk.stat().st_size}"
    assert f"1 of 3 shards changed since they were counted ({why}): counting them again" in (
        caplog.text
    )


def test_a_new_etag_of_the_same_size_is_counted_again(bare_shards, tmp_path, caplog) -> None:
    cache, faults = tmp_path / "cache", Faults(etag='"v1"')
    with serving(bare_shards, faults) as url:
        _dataset(url, cache)
        _dataset(url, cache)
        assert len(_shard_gets(faults)) == 3  # the second start read none
        faults.etag = '"v2"'
        with caplog.at_level(logging.INFO):
            _dataset(url, cache)
    assert len(_shard_gets(faults)) == 6
    assert "its etag was '\"v1\"', now '\"v2\"'): counting them again" in caplog.text


def test_a_server_that_refuses_head_is_asked_for_one_byte(bare_shards, tmp_path) -> None:
    cache, faults = tmp_path / "cache", Faults(head=False)
    with serving(bare_shards, faults) as url:
        _dataset(url, cache)
        del faults.requests[:]
        assert _dataset(url, cache).shard_sizes == [16, 16, 16]
    one_byte = [(f"/train-00000{i}.tar", "bytes=0-0") for i in range(3)]
    assert sorted(faults.requests) == [("/shards.json", None), *one_byte]  # no shard read


def test_without_a_cache_every_start_counts_and_progress_is_logged(
    bare_shards, tmp_path, caplog, monkeypatch
) -> None:
    monkeypatch.setattr(tally, "PROGRESS_S", 0.0)  # a progress line at every wait
    faults = Faults()
    with serving(bare_shards, faults) as url, caplog.at_level(logging.INFO):
        _dataset(url, None)
        _dataset(url, None)
    assert len(_shard_gets(faults)) == 6
    assert "not cached (dataset.manifest_cache is null): every start counts them again" in (
        caplog.text
    )
    progress = rf"counting the shards of {url}/: [0-2]/3 counted, \d+ samples so far, [\d,]+ of"
    assert re.search(progress, caplog.text)


def test_a_truncated_shard_stops_the_count_naming_it(bare_shards, tmp_path) -> None:
    cut = bare_shards / "train-000002.tar"
    cut.write_bytes(cut.read_bytes()[:30_000])
    with serving(bare_shards) as url:
        with pytest.raises(ShardError, match=rf"^{url}/train-000002\.tar: not a readable tar"):
            _dataset(url, tmp_path / "cache")
        skipping = _dataset(
            url, tmp_path / "cache", decode=DecodePolicy(on_error="skip"), skip_bad_shards=True
        )
    assert skipping.shard_sizes[:2] == [16, 16] and skipping.shard_sizes[2] < 16


def test_a_count_that_a_broken_connection_ended_is_not_cached(bare_shards, tmp_path) -> None:
    faults = Faults(cut=5000, drops=2)  # each shard's first two answers: 5,000 bytes, then cut
    with serving(bare_shards, faults) as url:
        with pytest.raises(ShardError, match=r"network error at byte 10,000 after 1 retr"):
            _dataset(url, tmp_path / "cache")
        assert _dataset(url, tmp_path / "cache").shard_sizes == [16, 16, 16]


def test_a_given_manifest_that_is_missing_is_still_refused(bare_shards) -> None:
    with serving(bare_shards) as url, pytest.raises(ValueError) as caught:
        _dataset(url, None, manifest=f"{url}/shards.json")
    assert re.search(r"^dataset\.manifest: .*/shards\.json: HTTP 404", str(caught.value))
    assert "python -m engine.data.shards.manifest" in str(caught.value)
