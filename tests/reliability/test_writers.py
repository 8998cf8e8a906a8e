"""The writers (mode=shards, mode=cache) never leave a silently mixed or half-written set: one
writer per folder at a time, a write cut short (kill -9, a file-size cap standing in for a full
disk) is refused by training and by a rerun without overwrite (shards) or resumed (cache), only
their own files are replaced or removed, and a folder that is no folder, or lies inside the
dataset, is one line naming the key."""

from __future__ import annotations

import resource
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from engine.data.datasets.cache import CachedImages
from engine.data.datasets.tar_shards import TarShardDataset
from engine.modes.cache import cache
from engine.modes.shards import shards

ROOT = Path(__file__).resolve().parents[2]
SHARDS = ("mode=shards", "shards.max_samples=16")
TRAIN_SAMPLES, VAL_SAMPLES = 48, 30  # the test demo set


def _write_shards(make_cfg, out: Path, *overrides: str) -> dict[str, float]:
    return shards(make_cfg(*SHARDS, f"shards.dir={out}", *overrides))


def _read(out: Path, split: str = "val") -> TarShardDataset:
    pattern = str(out / f"{split}-*.tar")
    return TarShardDataset(split, train_shards=pattern, val_shards=pattern)


# A process that holds the lock file argv[1] (and with argv[2] a shard file written under it, as
# a mode=shards write in progress) until it is killed.
HOLDER = """
import sys, time
from pathlib import Path
from engine.core.folder_lock import hold
hold(sys.argv[1])
if len(sys.argv) > 2:
    Path(sys.argv[2]).write_bytes(b"")
print("held", flush=True)
time.sleep(120)
"""


def _holder(*args: Path) -> subprocess.Popen:
    proc = subprocess.Popen(
        [sys.executable, "-c", HOLDER, *map(str, args)], cwd=ROOT, stdout=subprocess.PIPE, text=True
    )
    assert proc.stdout.readline().strip() == "held"  # type: ignore[union-attr]
    return proc


def _kill(proc: subprocess.Popen) -> None:
    proc.send_signal(signal.SIGKILL)
    proc.wait()


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


def _capped(limit: int):
    """A child's set-up: files it writes may not grow past `limit` bytes (EFBIG, as a disk
    that is full or a quota reached fails a write)."""

    def set_up() -> None:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    return set_up


def _train_py(demo_dir: Path, tmp_path: Path, *args: str, limit: int | None = None):
    return subprocess.run(
        [sys.executable, str(ROOT / "train.py"), f"paths.demo_dir={demo_dir}", *args,
         f"hydra.run.dir={tmp_path / 'runs' / str(len(list(tmp_path.glob('runs/*'))))}",
         f"paths.log_dir={tmp_path}"],
        cwd=tmp_path, capture_output=True, text=True, check=False,
        preexec_fn=None if limit is None else _capped(limit),
    )  # fmt: skip


def _error_line(stderr: str) -> str:
    """The line of the error that stopped the run (Hydra prints a hint after it)."""
    return next(line for line in reversed(stderr.splitlines()) if "while writing" in line)


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
