"""The writers (mode=shards, mode=cache) never leave a silently mixed or half-written set: only
their own files are replaced or removed, and a folder that is no folder, or lies inside the
dataset, is one line naming the key. Against other processes (one writer per folder at a time,
a write cut short by kill -9 or a full disk): tests/process/test_writer_processes.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from engine.data.datasets.cache import CachedImages
from engine.data.datasets.tar_shards import TarShardDataset
from engine.modes.cache import cache
from engine.modes.shards import shards

SHARDS = ("mode=shards", "shards.max_samples=16")
TRAIN_SAMPLES, VAL_SAMPLES = 48, 30  # the test demo set


def _write_shards(make_cfg, out: Path, *overrides: str) -> dict[str, float]:
    return shards(make_cfg(*SHARDS, f"shards.dir={out}", *overrides))


def _read(out: Path, split: str = "val") -> TarShardDataset:
    pattern = str(out / f"{split}-*.tar")
    return TarShardDataset(split, train_shards=pattern, val_shards=pattern)


# shards ------------------------------------------------------------------------------------------
def test_overwrite_replaces_only_the_shard_writers_own_files(make_cfg, tmp_path) -> None:
    out = tmp_path / "shards"
    out.mkdir()
    mine = ["train-notes.tar.txt", "val-backup.tar.bak", "train-1.tar", "notes.md"]
    for name in mine:
        (out / name).write_text("the user's")
    _write_shards(make_cfg, out)  # a folder without shards of its own is written into
    with pytest.raises(FileExistsError, match=r"already holds shards \(classes.txt|train-0"):
        _write_shards(make_cfg, out)
    _write_shards(make_cfg, out, "shards.overwrite=true", "shards.max_samples=100")
    assert all((out / name).read_text() == "the user's" for name in mine)
    assert sorted(p.name for p in out.glob("train-0*")) == ["train-000000.tar"]


# cache -------------------------------------------------------------------------------------------


def test_rebuild_removes_only_the_caches_own_files_also_through_a_link(make_cfg, tmp_path):
    cached, elsewhere = tmp_path / "cache", tmp_path / "elsewhere"
    elsewhere.mkdir()
    cached.mkdir()
    (cached / "train").symlink_to(elsewhere, target_is_directory=True)
    (elsewhere / "notes.txt").write_text("the user's")
    args = ("mode=cache", f"cache.dir={cached}", "cache.short_side=32")
    cache(make_cfg(*args))
    first = (elsewhere / "pixels.u8").read_bytes()
    cache(make_cfg(*args, "cache.rebuild=true"))
    assert (elsewhere / "notes.txt").read_text() == "the user's"
    assert (elsewhere / "pixels.u8").read_bytes() == first
    assert len(CachedImages(str(cached), "train")) == TRAIN_SAMPLES


@pytest.mark.parametrize("mode", ["cache", "shards"])
def test_an_output_folder_inside_the_dataset_is_refused(make_cfg, demo_dir, mode) -> None:
    root = demo_dir / "imagefolder"
    inside = root / "train"
    with pytest.raises(ValueError, match=rf"{mode}.dir={inside} is inside dataset.root={root}"):
        (cache if mode == "cache" else shards)(make_cfg(f"mode={mode}", f"{mode}.dir={inside}"))


@pytest.mark.parametrize("mode", ["cache", "shards"])
def test_an_output_folder_that_is_a_link_to_nothing_or_a_file_is_one_line(
    make_cfg, tmp_path, mode
) -> None:
    dangling, file = tmp_path / "dangling", tmp_path / "file"
    dangling.symlink_to(tmp_path / "nowhere")
    file.write_text("x")
    write = cache if mode == "cache" else shards
    with pytest.raises(FileNotFoundError, match=rf"{mode}.dir={dangling}: a symbolic link to .*"):
        write(make_cfg(f"mode={mode}", f"{mode}.dir={dangling}"))
    with pytest.raises(NotADirectoryError, match=rf"{mode}.dir={file} is a file, not a folder"):
        write(make_cfg(f"mode={mode}", f"{mode}.dir={file}"))
    assert not (tmp_path / "nowhere").exists()
