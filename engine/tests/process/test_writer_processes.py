"""The cache and shard writers against other processes: a write in progress in another process
(a lock holder started here) or cut short by its kill -9 is refused by training and by a rerun
without overwrite, a second cache build into a busy folder is refused, and a full disk (a
train.py child whose files may not grow) names the file and leaves no mixed set (the in-process
checks: tests/test_writers_own_files.py)."""

from __future__ import annotations

import json
import os
import resource
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from engine.data.cache_store import StaleCacheError
from engine.data.datasets.cache import CachedImages
from engine.data.datasets.tar_shards import TarShardDataset
from engine.modes.cache import cache
from engine.modes.shards import shards
from tests.conftest import TRAIN, reference_args

SHARDS = ("mode=shards", "shards.max_samples=16")
TRAIN_SAMPLES, VAL_SAMPLES = 48, 30  # the test demo set


def _write_shards(reference_cfg, out: Path, *overrides: str) -> dict[str, float]:
    return shards(reference_cfg("s", *SHARDS, f"shards.dir={out}", *overrides))


def _read(out: Path, split: str = "val") -> TarShardDataset:
    pattern = str(out / f"{split}-*.tar")
    return TarShardDataset(split, train_shards=pattern, val_shards=pattern)


# A process that holds the lock file argv[1] (and with argv[2] a shard file written under it, as
# a mode=shards write in progress: its mark listing the files of the set, shards.writing there)
# until it is killed.
HOLDER = """
import json, sys, time
from pathlib import Path
from engine.core.folder_lock import hold
lock = Path(sys.argv[1])
writes = sorted({p.name for p in lock.parent.glob("*-*.tar")} | {Path(sys.argv[-1]).name})
files = [*writes, "classes.txt", "shards.json", "shards.writing"]
hold(lock, **({"writer": "mode=shards", "files": files} if len(sys.argv) > 2 else {}))
if len(sys.argv) > 2:
    (lock.parent / "shards.writing").write_text(json.dumps({"pid": 7}))
    Path(sys.argv[2]).write_bytes(b"")
print("held", flush=True)
time.sleep(120)
"""


def _holder(*args: Path) -> subprocess.Popen:
    proc = subprocess.Popen(
        [sys.executable, "-c", HOLDER, *map(str, args)],
        cwd=TRAIN.parent,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout.readline().strip() == "held"  # type: ignore[union-attr]
    return proc


def _kill(proc: subprocess.Popen) -> None:
    proc.send_signal(signal.SIGKILL)
    proc.wait()


def _capped(limit: int):
    """A child's set-up: files it writes may not grow past `limit` bytes (EFBIG, as a disk
    that is full or a quota reached fails a write)."""

    def set_up() -> None:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    return set_up


def _train_py(demo_dir: Path, tmp_path: Path, *args: str, limit: int | None = None):
    return subprocess.run(
        [sys.executable, str(TRAIN), *reference_args(demo_dir, tmp_path, *args),
         f"hydra.run.dir={tmp_path / 'runs' / str(len(list(tmp_path.glob('runs/*'))))}"],
        cwd=tmp_path, capture_output=True, text=True, check=False,
        preexec_fn=None if limit is None else _capped(limit),
    )  # fmt: skip


def _error_line(stderr: str) -> str:
    """The line of the error that stopped the run (Hydra prints a hint after it)."""
    return next(line for line in reversed(stderr.splitlines()) if "while writing" in line)


def test_a_shard_write_in_progress_or_cut_short_is_refused(reference_cfg, tmp_path) -> None:
    """Shards that mode=shards is still writing, or that its kill -9 left (no manifest, a
    whole set of shards for all a reader can tell), are neither trained on nor written over
    without shards.overwrite."""
    out = tmp_path / "shards"
    _write_shards(reference_cfg, out)  # a whole set, then a rerun that dies at a shard boundary:
    (out / "shards.json").unlink()
    (out / "val-000001.tar").unlink()
    writer = _holder(out / ".shards.lock", out / "val-000002.tar")
    try:
        with pytest.raises(ValueError, match=rf"{out} is being written by mode=shards now \(pid"):
            _read(out)
        with pytest.raises(FileExistsError, match=r"being written by another mode=shards run"):
            _write_shards(reference_cfg, out, "shards.overwrite=true")
    finally:
        _kill(writer)
    with pytest.raises(ValueError, match=rf"{out} holds an unfinished set of shards: .*cut short"):
        _read(out)
    with pytest.raises(FileExistsError, match=r"already holds an unfinished set of shards"):
        _write_shards(reference_cfg, out)
    _write_shards(reference_cfg, out, "shards.overwrite=true")
    assert not (out / "shards.writing").exists()
    assert "val-000002.tar" not in json.loads((out / ".shards.lock").read_text())["files"]
    assert len(_read(out)) == VAL_SAMPLES and len(_read(out, "train")) == TRAIN_SAMPLES


def test_a_disk_that_fills_up_mid_write_names_the_file_and_leaves_no_mixed_set(
    demo_dir, reference_cfg, tmp_path
) -> None:
    out, cached = tmp_path / "shards", tmp_path / "cache"
    args = ("mode=shards", f"shards.dir={out}", "shards.max_samples=200", "shards.encoding=png")
    done = _train_py(demo_dir, tmp_path, *args, limit=100_000)
    last = _error_line(done.stderr)
    assert done.returncode == 1 and "File too large while writing" in last, done.stderr[-2000:]
    assert f"{out}/train-000000.tar" in last and "another shards.dir" in last
    with pytest.raises(ValueError, match="unfinished set of shards"):
        _read(out, "train")
    _write_shards(reference_cfg, out, "shards.overwrite=true")
    assert len(_read(out, "train")) == TRAIN_SAMPLES

    args = ("mode=cache", f"cache.dir={cached}", "cache.short_side=40", "cache.commit_every=4")
    done = _train_py(demo_dir, tmp_path, *args, limit=100_000)
    last = _error_line(done.stderr)
    assert done.returncode == 1 and f"File too large while writing {cached}/train" in last
    assert "another cache.dir); a rerun resumes from its last commit" in last
    with pytest.raises(StaleCacheError, match="unfinished"):
        CachedImages(str(cached), "train")
    cache(reference_cfg("c", *args))  # resumes
    whole = tmp_path / "whole"
    cache(reference_cfg("w", *args[:-1], f"cache.dir={whole}", "cache.commit_every=4"))
    for name in ("index.i64", "pixels.u8"):
        assert (cached / "train" / name).read_bytes() == (whole / "train" / name).read_bytes()


def test_a_second_cache_build_into_a_busy_folder_is_refused(reference_cfg, tmp_path) -> None:
    cached = tmp_path / "cache"
    writer = _holder(cached / ".cache.lock")
    try:
        with pytest.raises(FileExistsError, match=rf"cache.dir: {cached} is being written by"):
            cache(reference_cfg("c", "mode=cache", f"cache.dir={cached}"))
    finally:
        _kill(writer)
    assert sorted(os.listdir(cached)) == [".cache.lock"]
