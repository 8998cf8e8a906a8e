"""A run in a fixed hydra.run.dir (a requeued SLURM job), on the reference project: leftovers
of a kill -9 are cleaned, files follow the umask and a full disk names the file. A real kill -9
and the requeue after it: process/test_reference_processes.py. Which checkpoints resume=auto
continues, skips or refuses: test_checkpoints.py and test_reference_project.py."""

from __future__ import annotations

import errno
import os
import subprocess
from pathlib import Path

import pytest

from engine.core.io import atomic_write_bytes, remove_stale_temporaries, write_json
from engine.runs.checkpoint_files import Checkpoints
from engine_dev.api import load_checkpoint
from engine_dev.cli import run_script
from tests.conftest import TRAIN, reference_args


def _one_epoch(demo_dir: Path, run: Path) -> subprocess.CompletedProcess:
    """One epoch (48 train images / batch 16: 3 steps) in the fixed run dir `run`, a checkpoint
    after each step."""
    return run_script(
        TRAIN,
        *reference_args(demo_dir, run.parent, f"hydra.run.dir={run}"),
        "loader.batch_size=16",
        "loader.num_workers=0",
        "trainer.max_epochs=1",
        "trainer.checkpoint.every_n_steps=1",
        cwd=run.parent,
    )


# leftovers and permissions --------------------------------------------------------------------
@pytest.mark.parametrize("umask", [0o002, 0o022, 0o077])
def test_written_files_follow_the_umask(tmp_path: Path, umask: int) -> None:
    old = os.umask(umask)
    try:
        with open(tmp_path / "plain", "w"):
            pass
        atomic_write_bytes(tmp_path / "bytes", b"x")
        write_json(tmp_path / "metrics.json", {"a": 1})
        ckpt = Checkpoints(tmp_path / "checkpoints", 1, "val/loss", "min")
        ckpt.save({"step": 1}, {"val/loss": 1.0})
    finally:
        os.umask(old)
    expected = (tmp_path / "plain").stat().st_mode & 0o777
    assert expected == 0o666 & ~umask
    files = [
        "bytes",
        "metrics.json",
        *(f"checkpoints/{n}" for n in ("step00000001.pt", "last.pt", "best.pt")),
    ]
    assert {f: (tmp_path / f).stat().st_mode & 0o777 for f in files} == dict.fromkeys(
        files, expected
    )


def test_stale_temporaries_are_removed_and_nothing_else(tmp_path: Path) -> None:
    folder = tmp_path / "checkpoints"
    folder.mkdir()
    (folder / ".step00000004.pt.a1b2c3d4.tmp").write_bytes(b"\0" * (2 << 20))
    (folder / ".step00000005.pt.x_9yz0ab.tmp").write_bytes(b"")
    kept = ["step00000003.pt", ".step00000004.pt.tmp", "notes.tmp", ".step5.pt.ab.tmp"]
    for name in kept:
        (folder / name).write_bytes(b"x")
    assert remove_stale_temporaries(folder) == 2
    assert sorted(p.name for p in folder.iterdir()) == sorted(kept)
    assert remove_stale_temporaries(tmp_path / "missing") == 0


def test_a_run_cleans_its_own_leftovers_and_shares_its_files(demo_dir: Path, tmp_path: Path):
    """Temp files of a write cut short by kill -9 (2 MiB and 0 B) are removed at the start from
    this run's checkpoints/ only, and under umask 002 every file is group-writable."""
    run = tmp_path / "run"
    (run / "checkpoints").mkdir(parents=True)
    (run / ".run.lock").touch()  # the killed run's: it held this folder
    (run / "checkpoints" / ".step00000004.pt.a1b2c3d4.tmp").write_bytes(b"\0" * (2 << 20))
    (run / "checkpoints" / ".step00000005.pt.e5f6g7h8.tmp").write_bytes(b"")
    elsewhere = tmp_path / "other" / "checkpoints" / ".step00000004.pt.a1b2c3d4.tmp"
    elsewhere.parent.mkdir(parents=True)
    elsewhere.write_bytes(b"")
    old = os.umask(0o002)
    try:
        done = _one_epoch(demo_dir, run)
    finally:
        os.umask(old)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "removed 2 temporary file(s)" in done.stdout
    assert not list((run / "checkpoints").glob("*.tmp")) and elsewhere.exists()
    written = [
        "metrics.json",
        "config_resolved.yaml",
        *(f"checkpoints/{n}" for n in ("step00000003.pt", "last.pt", "best.pt")),
    ]
    assert {f: oct((run / f).stat().st_mode & 0o777) for f in written} == dict.fromkeys(
        written, oct(0o664)
    )


# a full disk ------------------------------------------------------------------------------------
def test_a_failed_write_names_the_file_and_the_fix(tmp_path: Path, monkeypatch) -> None:
    path = tmp_path / "checkpoints" / "step00000002.pt"
    atomic_write_bytes(path, b"old")

    def full(fd: int) -> None:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(os, "fsync", full)
    message = (
        r"No space left on device while writing .*step00000002\.pt: free space on that "
        r"disk, or .*another hydra\.run\.dir"
    )
    with pytest.raises(OSError, match=message) as failed:
        atomic_write_bytes(path, b"new" * 1000)
    assert failed.value.errno == errno.ENOSPC and str(path) in str(failed.value)
    assert path.read_bytes() == b"old" and sorted(path.parent.iterdir()) == [path]


@pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="needs /proc/self/fd (Linux)")
def test_a_full_disk_stops_the_run_naming_the_checkpoint(demo_dir, tmp_path, monkeypatch) -> None:
    """The disk fills up after two step checkpoints: the fsync of every later step's temp file
    fails with ENOSPC, as a full disk or quota reports it on write or on fsync (NFS, delayed
    allocation)."""
    written, real_fsync = [], os.fsync

    def fsync(fd: int) -> None:
        if Path(os.readlink(f"/proc/self/fd/{fd}")).name.startswith(".step"):
            if len(written) == 2:
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
            written.append(fd)
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    run = tmp_path / "run"
    done = _one_epoch(demo_dir, run)
    assert done.returncode != 0
    target = run / "checkpoints" / "step00000003.pt"
    assert f"No space left on device while writing {target}: free space on that disk" in (
        done.stderr
    )
    assert "another hydra.run.dir" in done.stderr
    assert sorted(p.name for p in (run / "checkpoints").iterdir()) == [
        "config_key",
        "last.pt",
        "step00000001.pt",
        "step00000002.pt",
    ]
    assert load_checkpoint(run / "checkpoints" / "last.pt")["step"] == 2
