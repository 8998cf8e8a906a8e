"""A run in a fixed hydra.run.dir (a requeued SLURM job): resume=auto continues its own folder,
checkpoints are matched by their own config_key, a folder of another run is refused, leftovers
of a kill -9 are cleaned, files follow the umask and a full disk names the file. A real kill -9
and the requeue after it: tests/process/test_run_dir_processes.py."""

from __future__ import annotations

import errno
import json
import os
import shutil
import signal
import subprocess
from pathlib import Path

import pytest
import torch

from engine.core.io import atomic_write_bytes, remove_stale_temporaries, write_json
from engine.runs.checkpoint_files import Checkpoints, load_checkpoint, save_checkpoint
from src.step import TrainStep
from tests.cli import run_cli
from tests.conftest import NARROW_MODEL
from tests.train_process import FAULTY, allowing

SLOW = (
    f"dataset._target_={FAULTY}",
    "+dataset.fault=slow",
    "+dataset.delay_s=0.01",
    allowing(FAULTY),
)
# 48 train images / batch 16 = 3 steps an epoch, 9 in all; a checkpoint after each step
RUN = (
    "loader.batch_size=16",
    "loader.num_workers=1",
    "trainer.max_epochs=3",
    "trainer.checkpoint.every_n_steps=1",
    NARROW_MODEL,
    *SLOW,
)
COMPARED = ("val/acc", "val/loss", "train/loss", "val/best_acc", "epochs")


def _args(demo_dir: Path, run: Path, *extra: str) -> list[str]:
    return [
        f"paths.demo_dir={demo_dir}",
        f"paths.log_dir={run.parent}",
        f"hydra.run.dir={run}",
        *RUN,
        *extra,
    ]


def _train(demo_dir: Path, run: Path, *extra: str) -> subprocess.CompletedProcess:
    return run_cli(*_args(demo_dir, run, *extra), cwd=run.parent)


def _uninterrupted(demo_dir: Path, run: Path) -> Path:
    """The run in `run`, uninterrupted: what continued runs are compared with."""
    done = _train(demo_dir, run)
    assert done.returncode == 0, done.stderr[-3000:]
    return run


@pytest.fixture(scope="module")
def whole(demo_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The uninterrupted run, to compare continued runs with."""
    return _uninterrupted(demo_dir, tmp_path_factory.mktemp("whole") / "run")


def _stopped_at(demo_dir: Path, run: Path, step: int, monkeypatch: pytest.MonkeyPatch) -> int:
    """Run until optimizer step `step`, then stop as a SIGTERM does (checkpoint, exit 143):
    the folder of an unfinished run, its checkpoints up to `step`."""
    original = TrainStep.optimizer_step

    def stepping(self: TrainStep) -> None:
        original(self)
        if self.steps == step:
            signal.raise_signal(signal.SIGTERM)

    with monkeypatch.context() as patched:
        patched.setattr(TrainStep, "optimizer_step", stepping)
        done = _train(demo_dir, run)
    assert done.returncode == 128 + signal.SIGTERM, done.stderr[-3000:]
    return step


def _assert_same_result(run: Path, whole: Path) -> None:
    a = load_checkpoint(whole / "checkpoints" / "last.pt")["model"]
    b = load_checkpoint(run / "checkpoints" / "last.pt")["model"]
    assert a.keys() == b.keys() and all(torch.allclose(a[k], b[k], atol=1e-6) for k in a)
    expected = json.loads((whole / "metrics.json").read_text())
    got = json.loads((run / "metrics.json").read_text())
    for key in COMPARED:
        assert got[key] == pytest.approx(expected[key], abs=1e-6), key


def _steps(run: Path) -> list[str]:
    return sorted(p.name for p in (run / "checkpoints").glob("step*.pt"))


# 1. resume=auto with a fixed run dir -------------------------------------------------------------


# 2. resume=auto trusts the checkpoint, not the folder --------------------------------------------
def test_auto_skips_another_configs_and_malformed_steps(
    demo_dir, tmp_path, whole, monkeypatch
) -> None:
    """(b) another config's checkpoint (another model width) and (c) one lacking keys, as the
    newest steps of the folder: each one warning line naming it, then the good step before."""
    run = tmp_path / "run"
    saved = _stopped_at(demo_dir, run, 3, monkeypatch)
    good = load_checkpoint(run / "checkpoints" / f"step{saved:08d}.pt")
    layer = next(iter(good["model"]))
    other = good | {
        "config_key": "0123456789abcdef",
        "step": saved + 1,
        "model": good["model"] | {layer: torch.zeros(3, 1)},
    }
    foreign, malformed = (run / "checkpoints" / f"step{saved + n:08d}.pt" for n in (1, 2))
    save_checkpoint(foreign, other)
    lacking = {k: v for k, v in good.items() if k != "batches_done"} | {"step": saved + 2}
    save_checkpoint(malformed, lacking)
    again = _train(demo_dir, run, "trainer.resume=auto")
    assert again.returncode == 0, again.stderr[-3000:]
    out = again.stdout
    assert f"skipping checkpoint: {foreign} comes from another config (config_key 0123" in out
    assert f"skipping checkpoint: {malformed} is not a training checkpoint" in out
    assert "lacks ['batches_done']" in out
    assert f"resumed from {run}/checkpoints/step{saved:08d}.pt" in out
    _assert_same_result(run, whole)
    aside = sorted(p.name for p in (run / "checkpoints").glob("*.set-aside"))
    assert aside == [f"{foreign.name}.set-aside", f"{malformed.name}.set-aside"]
    assert load_checkpoint(run / "checkpoints" / aside[0])["config_key"] == "0123456789abcdef"


def test_a_folder_of_another_run_is_refused_and_left_as_it_was(demo_dir, tmp_path, whole):
    """(a) a finished run's folder, reused by another config with resume=auto, or by the same
    config with resume=null: one line naming the folder and the fix; nothing changes there."""
    run = tmp_path / "run"
    shutil.copytree(whole, run)
    before = {p.name: p.stat().st_mtime_ns for p in (run / "checkpoints").iterdir()}
    metrics = (run / "metrics.json").read_text()
    other = _train(demo_dir, run, "optimizer.lr=0.01", "trainer.resume=auto")
    assert other.returncode != 0
    assert "comes from another config" in other.stdout  # each of its files named
    refusal = f"{run}/checkpoints already holds 3 step checkpoint(s) this run does not continue"
    assert refusal in other.stderr and "another hydra.run.dir" in other.stderr
    assert "Traceback" not in other.stderr
    fresh = _train(demo_dir, run)
    assert fresh.returncode != 0 and refusal in fresh.stderr
    assert "continue them with trainer.resume=auto" in fresh.stderr
    assert {p.name: p.stat().st_mtime_ns for p in (run / "checkpoints").iterdir()} == before
    assert (run / "metrics.json").read_text() == metrics


def test_an_explicit_checkpoint_of_another_model_is_one_line(demo_dir, tmp_path, whole) -> None:
    other = tmp_path / "other.pt"
    state = load_checkpoint(whole / "checkpoints" / "last.pt")
    layer = next(iter(state["model"]))
    save_checkpoint(other, state | {"model": state["model"] | {layer: torch.zeros(3, 1)}})
    done = _train(demo_dir, tmp_path / "run", f"trainer.resume={other}")
    assert done.returncode != 0 and "Traceback" not in done.stderr
    assert (
        f"trainer.resume={other}: this file does not fit this run: its weights do not fit this model ({layer} is "
        "[3, 1] in the file" in done.stderr
    )


def test_a_folder_of_another_configs_best_and_last_is_refused(demo_dir, tmp_path, whole):
    """A finished run's folder whose step files were removed (best.pt and last.pt kept as its
    result), reused by another config: refused naming the folder, nothing overwritten."""
    run = tmp_path / "run"
    shutil.copytree(whole, run)
    for step in (run / "checkpoints").glob("step*.pt"):
        step.unlink()
    before = {p.name: p.read_bytes() for p in (run / "checkpoints").iterdir()}
    other = _train(demo_dir, run, "optimizer.lr=0.01")
    assert other.returncode != 0 and "Traceback" not in other.stderr
    refusal = (
        f"{run}/checkpoints already holds last.pt and best.pt this run does not continue "
        "(newest last.pt, of another config"
    )
    assert refusal in other.stderr and "another hydra.run.dir" in other.stderr
    assert {p.name: p.read_bytes() for p in (run / "checkpoints").iterdir()} == before


def _optimizer_of_another_shape(state: dict) -> dict:
    first = next(iter(state["optimizer"]["state"]))
    wrong = {
        k: torch.zeros(3) if v.dim() else v for k, v in state["optimizer"]["state"][first].items()
    }
    return state | {"optimizer": state["optimizer"] | {"state": {first: wrong}}}


MALFORMED = {
    "a list": (lambda state: [1, 2, 3], "holds a list, not a checkpoint"),
    "optimizer state of another shape": (
        _optimizer_of_another_shape,
        "its optimizer state does not fit this model: exp_avg of parameter 0 is [3] in the file",
    ),
}


@pytest.mark.parametrize("case", list(MALFORMED))
def test_a_malformed_newest_step_is_skipped_or_named(demo_dir, tmp_path, whole, case):
    """The newest step of a run, malformed but loadable: given by name, one line naming it and
    what is wrong; under resume=auto, skipped in one line and the step before continued, to
    the uninterrupted run's result."""
    make, says = MALFORMED[case]
    run = tmp_path / "run"
    shutil.copytree(whole, run)
    newest = run / "checkpoints" / "step00000009.pt"
    save_checkpoint(newest, make(load_checkpoint(newest)))
    named = _train(demo_dir, tmp_path / "named", f"trainer.resume={newest}")
    assert named.returncode != 0 and "Traceback" not in named.stderr
    assert f"{newest}" in named.stderr and says in named.stderr
    again = _train(demo_dir, run, "trainer.resume=auto")
    assert again.returncode == 0, again.stderr[-3000:]
    assert f"skipping checkpoint: {newest}" in again.stdout and says in again.stdout
    assert f"resumed from {run}/checkpoints/step00000008.pt" in again.stdout
    _assert_same_result(run, whole)


def _one_epoch(demo_dir: Path, run: Path) -> subprocess.CompletedProcess:
    """One epoch (3 steps) in the fixed run dir `run`, a checkpoint after each step."""
    return run_cli(
        f"paths.demo_dir={demo_dir}",
        f"paths.log_dir={run.parent}",
        f"hydra.run.dir={run}",
        "loader.batch_size=16",
        "loader.num_workers=0",
        "trainer.max_epochs=1",
        "trainer.checkpoint.every_n_steps=1",
        cwd=run.parent,
    )


# 3. leftovers and permissions --------------------------------------------------------------------
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


# 4. a full disk ----------------------------------------------------------------------------------
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
