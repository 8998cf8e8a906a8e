"""The cache and shard writers against other processes: a write in progress or cut short, a disk that fills up mid-write, a second build into a busy folder."""

from __future__ import annotations

import os

import pytest

from engine.data.cache_store import StaleCacheError
from engine.data.datasets.cache import CachedImages
from engine.modes.cache import cache
from tests.reliability.test_writers import (
    TRAIN_SAMPLES,
    VAL_SAMPLES,
    _error_line,
    _holder,
    _kill,
    _read,
    _train_py,
    _write_shards,
)


def test_a_shard_write_in_progress_or_cut_short_is_refused(make_cfg, tmp_path) -> None:
    """Shards that mode=shards is still writing, or that its kill -9 left (no manifest, a
    whole set of shards for all a reader can tell), are neither trained on nor written over
    without shards.overwrite."""
    out = tmp_path / "shards"
    _write_shards(make_cfg, out)  # a whole set, then a rerun that dies at a shard boundary:
    (out / "shards.json").unlink()
    (out / "val-000001.tar").unlink()
    writer = _holder(out / "shards.writing", out / "val-000002.tar")
    try:
        with pytest.raises(ValueError, match=rf"{out} is being written by mode=shards now \(pid"):
            _read(out)
        with pytest.raises(FileExistsError, match=r"being written by another mode=shards run"):
            _write_shards(make_cfg, out, "shards.overwrite=true")
    finally:
        _kill(writer)
    with pytest.raises(ValueError, match=rf"{out} holds an unfinished set of shards: .*cut short"):
        _read(out)
    with pytest.raises(FileExistsError, match=r"already holds an unfinished set of shards"):
        _write_shards(make_cfg, out)
    _write_shards(make_cfg, out, "shards.overwrite=true")
    assert not (out / "shards.writing").exists()
    assert len(_read(out)) == VAL_SAMPLES and len(_read(out, "train")) == TRAIN_SAMPLES


def test_a_disk_that_fills_up_mid_write_names_the_file_and_leaves_no_mixed_set(
    demo_dir, make_cfg, tmp_path
) -> None:
    out, cached = tmp_path / "shards", tmp_path / "cache"
    args = ("mode=shards", f"shards.dir={out}", "shards.max_samples=200", "shards.encoding=png")
    done = _train_py(demo_dir, tmp_path, *args, limit=100_000)
    last = _error_line(done.stderr)
    assert done.returncode == 1 and "File too large while writing" in last, done.stderr[-2000:]
    assert f"{out}/train-000000.tar" in last and "another shards.dir" in last
    with pytest.raises(ValueError, match="unfinished set of shards"):
        _read(out, "train")
    _write_shards(make_cfg, out, "shards.overwrite=true")
    assert len(_read(out, "train")) == TRAIN_SAMPLES

    args = ("mode=cache", f"cache.dir={cached}", "cache.short_side=40", "cache.commit_every=4")
    done = _train_py(demo_dir, tmp_path, *args, limit=100_000)
    last = _error_line(done.stderr)
    assert done.returncode == 1 and f"File too large while writing {cached}/train" in last
    assert "another cache.dir); a rerun resumes from its last commit" in last
    with pytest.raises(StaleCacheError, match="unfinished"):
        CachedImages(str(cached), "train")
    cache(make_cfg(*args))  # resumes
    whole = tmp_path / "whole"
    cache(make_cfg(*args[:-1], f"cache.dir={whole}", "cache.commit_every=4"))
    for name in ("index.i64", "pixels.u8"):
        assert (cached / "train" / name).read_bytes() == (whole / "train" / name).read_bytes()


def test_a_second_cache_build_into_a_busy_folder_is_refused(make_cfg, tmp_path) -> None:
    cached = tmp_path / "cache"
    writer = _holder(cached / ".cache.lock")
    try:
        with pytest.raises(FileExistsError, match=rf"cache.dir: {cached} is being written by"):
            cache(make_cfg("mode=cache", f"cache.dir={cached}"))
    finally:
        _kill(writer)
    assert sorted(os.listdir(cached)) == [".cache.lock"]
