"""Files a run writes: they follow the umask, and a full disk names the file and the fix."""

from __future__ import annotations

import errno
import os
import subprocess
import sys
from pathlib import Path

import pytest

from src.training.checkpoint import Checkpoints, load_checkpoint
from src.utils.io import atomic_write_bytes, write_json


@pytest.mark.parametrize("umask", [0o002, 0o022, 0o077])
def test_written_files_follow_the_umask(tmp_path: Path, umask: int) -> None:
    old = os.umask(umask)
    try:
        with open(tmp_path / "plain", "w"):
            pass
        atomic_write_bytes(tmp_path / "bytes", b"x")
        write_json(tmp_path / "metrics.json", {"a": 1})
        ckpt = Checkpoints(tmp_path / "checkpoints", 1, "val/acc", "max")
        ckpt.save({"step": 1}, {"val/acc": 1.0})
    finally:
        os.umask(old)
    expected = (tmp_path / "plain").stat().st_mode & 0o777
    assert expected == 0o666 & ~umask
    files = ["bytes", "metrics.json", *(f"checkpoints/{n}" for n in
             ("step00000001.pt", "last.pt", "best.pt"))]  # fmt: skip
    assert {f: (tmp_path / f).stat().st_mode & 0o777 for f in files} == dict.fromkeys(
        files, expected
    )


# 4. a full disk ------------------------------------------------------------------------------
def test_a_failed_write_names_the_file_and_the_fix(tmp_path: Path, monkeypatch) -> None:
    path = tmp_path / "checkpoints" / "step00000002.pt"
    atomic_write_bytes(path, b"old")

    def full(fd: int) -> None:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(os, "fsync", full)
    message = (r"No space left on device while writing .*step00000002\.pt: free space on that "
               r"disk, or .*another hydra\.run\.dir")  # fmt: skip
    with pytest.raises(OSError, match=message) as failed:
        atomic_write_bytes(path, b"new" * 1000)
    assert failed.value.errno == errno.ENOSPC and str(path) in str(failed.value)
    assert path.read_bytes() == b"old" and sorted(path.parent.iterdir()) == [path]


@pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="needs /proc/self/fd (Linux)")
def test_a_full_disk_stops_the_run_naming_the_checkpoint(demo_dir: Path, tmp_path: Path) -> None:
    run = tmp_path / "run"
    done = subprocess.run(
        [sys.executable, str(Path(__file__).with_name("disk_full.py")), "2",
         f"paths.demo_dir={demo_dir}", f"paths.log_dir={tmp_path}", f"hydra.run.dir={run}",
         "loader.batch_size=16", "loader.num_workers=0", "trainer.max_epochs=1",
         "trainer.checkpoint.every_n_steps=1"],
        cwd=tmp_path, capture_output=True, text=True, timeout=180, check=False,
    )  # fmt: skip
    assert done.returncode != 0
    target = run / "checkpoints" / "step00000003.pt"
    assert f"No space left on device while writing {target}: free space on that disk" in (
        done.stderr)  # fmt: skip
    assert "another hydra.run.dir" in done.stderr
    assert sorted(p.name for p in (run / "checkpoints").iterdir()) == [
        "config_key", "last.pt", "step00000001.pt", "step00000002.pt",
    ]  # fmt: skip
    assert load_checkpoint(run / "checkpoints" / "last.pt")["step"] == 2
