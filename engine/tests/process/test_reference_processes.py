"""The engine's process-level guarantees on its reference project alone: kill -9 mid-epoch,
then trainer.resume=auto from a new run dir or a requeue into the same one, ends with the
uninterrupted run's weights, EMA and metrics (the in-process checks of a fixed run dir:
test_run_dirs.py); a SIGTERM from outside checkpoints and exits 143; a 2-rank torchrun job
with uneven val shares writes one run dir whose metrics equal one process's evaluation, and a
job stopped mid-epoch and resumed under torchrun ends with the uninterrupted job's weights."""

from __future__ import annotations

import json
import signal
import subprocess
import time
from pathlib import Path

import pytest
import torch

from engine.runs.checkpoint_files import load_checkpoint
from engine_dev.fixtures import tree_fingerprint
from engine_dev.processes import Child, run_child
from tests.conftest import TRAIN, reference_args

FAULTS = Path(__file__).resolve().parent / "faults.py"


def _last(run: Path) -> dict:
    return load_checkpoint(run / "checkpoints" / "last.pt")


def _resumed_from(
    run: subprocess.CompletedProcess, run_dir: Path, epoch: int, batch: int, step: int | None = None
) -> bool:
    """Whether `run` logged its resume from a checkpoint of `run_dir` (that of optimizer step
    `step`, when given) at (epoch, batch)."""
    said = f"resumed from {run_dir / 'checkpoints'}"
    said += f"/step{step:08d}.pt" if step is not None else ""
    return any(
        said in line and line.endswith(f"epoch {epoch}, batch {batch}")
        for line in (run.stdout + run.stderr).splitlines()
    )


def _same(a: dict, b: dict) -> bool:
    return a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


def _assert_same_result(run: Path, whole: Path) -> None:
    """`run` ended with the uninterrupted run `whole`'s weights, EMA and metrics."""
    a, b = _last(whole), _last(run)
    assert _same(a["model"], b["model"])
    assert _same(a["train_step"]["ema"], b["train_step"]["ema"]), "EMA weights differ"
    assert _same(a["ema"]["weights"], b["ema"]["weights"]), "trainer.ema's weights differ"
    assert a["ema"]["updates"] == b["ema"]["updates"] == 9
    expected = json.loads((whole / "metrics.json").read_text())
    got = json.loads((run / "metrics.json").read_text())
    for key in ("val/loss", "train/loss", "epochs"):
        assert got[key] == pytest.approx(expected[key], abs=1e-6), key


def test_kill_9_mid_epoch_then_a_requeue_ends_as_the_uninterrupted_run(
    demo_dir: Path, tmp_path: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """kill -9 mid-epoch, then trainer.resume=auto from a new run dir (it finds the killed run)
    and the same command in the killed run's own folder (a SLURM requeue): both end as the
    uninterrupted run, weights, EMA and metrics, and the requeued folder keeps its newest
    checkpoints."""

    # 3 steps an epoch, a checkpoint every 2 steps (at 2 and 4); killed after step 5, in the
    # frozen epochs (the head alone until epoch 3), with the engine's EMA beside the step's own
    def args(run: Path, *more: str) -> list[str]:
        fixed = ("trainer.max_epochs=3", "trainer.checkpoint.every_n_steps=2")
        fixed += ("trainer.freeze_epochs=2", "trainer.ema.decay=0.5")
        return reference_args(demo_dir, run.parent, *fixed, f"hydra.run.dir={run}", *more)

    # outside tmp_path (the others' paths.log_dir), where trainer.resume=auto would find it
    whole = tmp_path_factory.mktemp("whole") / "whole"
    done = run_child(TRAIN, *args(whole), cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    job = tmp_path / "job"
    # killed with a loader worker alive (it ends with the run)
    killed = run_child(FAULTS, *args(job, "loader.num_workers=1"), cwd=tmp_path, KILL_AT_STEP="5")
    assert killed.returncode == -signal.SIGKILL
    assert _last(job)["step"] == 4 and not (job / "metrics.json").exists()
    elsewhere = run_child(TRAIN, *args(tmp_path / "elsewhere", "trainer.resume=auto"), cwd=tmp_path)
    assert elsewhere.returncode == 0, elsewhere.stderr[-3000:]
    assert _resumed_from(elsewhere, job, epoch=2, batch=1, step=4)
    _assert_same_result(tmp_path / "elsewhere", whole)
    requeued = run_child(TRAIN, *args(job, "trainer.resume=auto"), cwd=tmp_path)
    assert requeued.returncode == 0, requeued.stderr[-3000:]
    assert _resumed_from(requeued, job, epoch=2, batch=1, step=4)
    assert "starting fresh" not in requeued.stdout + requeued.stderr
    _assert_same_result(job, whole)
    # the newest trainer.checkpoint.keep_last (3) of its steps, the killed run's gone
    steps = sorted(p.name for p in (job / "checkpoints").glob("step*.pt"))
    assert steps == ["step00000006.pt", "step00000008.pt", "step00000009.pt"]


def test_sigterm_from_outside_checkpoints_and_exits_143(demo_dir, tmp_path):
    ready = tmp_path / "ready"
    args = reference_args(demo_dir, tmp_path, f"hydra.run.dir={tmp_path / 'job'}")
    with Child(FAULTS, *args, cwd=tmp_path, WAIT_AT_STEP="4", READY_FILE=str(ready)) as job:
        deadline = time.monotonic() + 120
        while not ready.exists():
            assert job.running(), job.finish().stderr[-3000:]
            assert time.monotonic() < deadline, "the run never reached step 4"
            time.sleep(0.05)
        job.process.send_signal(signal.SIGTERM)
        time.sleep(0.2)  # the handler runs in the child's main thread, between its sleeps
        ready.unlink()
        result = job.finish(deadline_s=120)
    assert result.returncode == 128 + signal.SIGTERM, result.stderr[-3000:]
    assert "SIGTERM received" in result.stdout + result.stderr
    saved = _last(tmp_path / "job")
    assert (saved["epoch"], saved["batches_done"], saved["step"]) == (2, 1, 4)


@pytest.fixture(scope="module")
def ddp_job(demo_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, tuple]:
    """A 2-epoch, 2-rank job on the CSV listing with a val split of 29 (shares of 15 and 14)."""
    logs = tmp_path_factory.mktemp("ddp")
    rows = (demo_dir / "val.csv").read_text().splitlines()
    (logs / "val29.csv").write_text("\n".join(rows[:30]) + "\n")
    knobs = ("dataset=csv", f"dataset.val_csv={logs / 'val29.csv'}", f"dataset.root={demo_dir}")
    knobs += ("trainer.max_epochs=2", "loader.batch_size=8")
    # the fine-tuning keys under DDP: the head alone in epoch 1 (the reducer told to expect
    # weights without gradients), then everything; an EMA; clipping
    knobs += ("trainer.freeze_epochs=1", "trainer.ema.decay=0.5", "trainer.clip_grad_norm=0.1")
    result = run_child(TRAIN, *reference_args(demo_dir, logs, *knobs), cwd=logs, nproc=2)
    assert result.returncode == 0, result.stderr[-4000:]
    return logs, knobs


def test_a_torchrun_job_writes_one_run_that_one_process_evaluates_alike(ddp_job, demo_dir):
    logs, _ = ddp_job
    (run,) = (p.parent for p in logs.glob("runs/*/*/.hydra"))  # rank 0's alone
    (metrics_file,) = logs.glob("runs/*/*/metrics.json")
    assert metrics_file.parent == run
    log = (run / "train.log").read_text()
    assert log.count("epoch 1/2") == 1 and "x 2 ranks = 16 per step" in log
    state = _last(run)
    assert state["world_size"] == 2 and state["step"] == 6  # 48 / (8 x 2 ranks) x 2 epochs
    assert not any(key.startswith("module.") for key in state["model"])
    out = logs / "eval"
    args = reference_args(
        demo_dir, out, "mode=eval", f"eval.checkpoint={run / 'checkpoints' / 'last.pt'}"
    )
    evaluated = run_child(TRAIN, *args, cwd=logs)
    assert evaluated.returncode == 0, evaluated.stderr[-3000:]
    (alone,) = out.glob("runs/*/*/metrics.json")
    trained, measured = json.loads(metrics_file.read_text()), json.loads(alone.read_text())
    assert measured["val/loss"] == pytest.approx(trained["val/loss"], rel=1e-6)


def test_a_torchrun_job_stopped_and_resumed_ends_as_the_uninterrupted_one(
    ddp_job, demo_dir, tmp_path
):
    logs, knobs = ddp_job
    args = reference_args(demo_dir, tmp_path, *knobs)
    stopped = run_child(FAULTS, *args, cwd=tmp_path, nproc=2, STOP_AT_STEP="4")
    assert stopped.returncode != 0
    (saved,) = tmp_path.glob("runs/*/*/checkpoints/last.pt")
    state = load_checkpoint(saved)
    assert (state["epoch"], state["batches_done"], state["step"]) == (2, 1, 4)
    assert state["world_size"] == 2
    resumed = run_child(TRAIN, *args, "trainer.resume=auto", cwd=tmp_path, nproc=2)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert _resumed_from(resumed, saved.parent.parent, epoch=2, batch=1)
    (whole,) = logs.glob("runs/*/*/metrics.json")
    (again,) = tmp_path.glob("runs/*/*/metrics.json")
    a, b = _last(whole.parent), _last(again.parent)
    assert _same(a["model"], b["model"]) and _same(a["train_step"]["ema"], b["train_step"]["ema"])
    assert _same(a["ema"]["weights"], b["ema"]["weights"])


def test_a_torchrun_job_refused_a_folder_writes_nothing_there(demo_dir, tmp_path):
    """Rank 0 refuses a folder of someone else's entries; the other rank, whose logging
    builds the log file's handler too (never attached), creates no log file there."""
    folder = tmp_path / "images"
    (folder / "cat").mkdir(parents=True)
    before = tree_fingerprint(folder)
    args = reference_args(demo_dir, tmp_path, "loader.num_workers=0", f"hydra.run.dir={folder}")
    refused = run_child(TRAIN, *args, cwd=tmp_path, nproc=2)
    assert refused.returncode != 0
    assert f"hydra.run.dir: {folder} already holds cat, and no .run.lock" in refused.stderr
    assert tree_fingerprint(folder) == before
