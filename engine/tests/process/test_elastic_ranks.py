"""Elastic resume across world sizes (torchrun, gloo on CPU), on the reference project: a
2-rank job killed with -9 mid-epoch goes on as one process with twice the batch and other
loader workers, and a single process goes on as 2 ranks; either way every remaining optimizer
step trains on the samples an uninterrupted job of the same global batch does (samples.csv),
each train sample once an epoch, and the final val/loss is the uninterrupted job's up to float
rounding. The uninterrupted job runs as one process: which samples make up a step does not
depend on the ranks that share it (engine.data.samplers.EpochSampler), and one process costs
the suite no torchrun. (One process, another split: test_elastic_resume.py.)"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from engine_dev.api import samples_by_step
from engine_dev.cli import run_script
from engine_dev.fixtures import assert_each_once
from engine_dev.processes import run_child
from tests.conftest import TRAIN, reference_args
from tests.interrupts import kill_at_step
from tests.process.test_reference_processes import FAULTS

# 48 demo train images, 16 per optimizer step (8 x 2 ranks, or 16 x 1): 3 steps an epoch;
# TinyNet has no dropout and no BatchNorm, whose statistics are per rank
RUN = (
    "trainer.max_epochs=2",
    "trainer.record_samples=true",
    "trainer.checkpoint.every_n_steps=1",
    "loader.drop_last=false",
)
TWO_RANKS = ("loader.batch_size=8", "loader.num_workers=0")
ONE_PROCESS = ("loader.batch_size=16", "loader.num_workers=2")
WORKER_A_RANK = "loader.num_workers=1"  # the killed 2-rank job's: one worker per rank
KILLED_AT = 5  # epoch 2, batch 2: the last checkpoint is step 4's, mid-epoch 2


def _job(demo_dir: Path, run_dir: Path, *overrides: str) -> list[str]:
    return reference_args(demo_dir, run_dir.parent, f"hydra.run.dir={run_dir}", *RUN, *overrides)


def _val_loss(run_dir: Path) -> float:
    return json.loads((run_dir / "metrics.json").read_text())["val/loss"]


@pytest.fixture(scope="module")
def whole(demo_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The uninterrupted job: one process, batches of 16 (= 8 x 2 ranks)."""
    run_dir = tmp_path_factory.mktemp("elastic") / "whole"
    result = run_script(TRAIN, *_job(demo_dir, run_dir, *ONE_PROCESS), cwd=run_dir.parent)
    assert result.returncode == 0, result.stderr[-3000:]
    return run_dir


def _same_as_whole(run_dir: Path, whole: Path) -> None:
    assert samples_by_step(run_dir) == samples_by_step(whole)
    assert_each_once(run_dir)
    assert _val_loss(run_dir) == pytest.approx(_val_loss(whole), rel=1e-5)


def test_two_ranks_killed_mid_epoch_go_on_as_one_process(demo_dir, tmp_path, whole) -> None:
    run_dir = tmp_path / "run"
    killed = run_child(
        FAULTS,
        *_job(demo_dir, run_dir, *TWO_RANKS, WORKER_A_RANK),
        cwd=tmp_path,
        nproc=2,
        KILL_AT_STEP=str(KILLED_AT),
    )
    # returned at all: no loader worker or forkserver of the killed ranks holds the job's
    # output pipes open (engine.data.loaders.exit_with)
    assert killed.returncode != 0 and max(samples_by_step(run_dir)) == KILLED_AT - 1
    resumed = run_script(
        TRAIN, *_job(demo_dir, run_dir, *ONE_PROCESS, "trainer.resume=auto"), cwd=tmp_path
    )
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    _same_as_whole(run_dir, whole)
    ranks = {int(line.split(",")[2]) for line in (run_dir / "samples.csv").read_text().split()[1:]}
    assert ranks == {0, 1}  # the steps before the kill, on both ranks


def test_one_process_goes_on_as_two_ranks(demo_dir, tmp_path, whole, monkeypatch) -> None:
    run_dir = tmp_path / "run"
    kill_at_step(monkeypatch, KILLED_AT)
    assert run_script(TRAIN, *_job(demo_dir, run_dir, *ONE_PROCESS), cwd=tmp_path).returncode == 1
    monkeypatch.undo()
    resumed = run_child(
        TRAIN, *_job(demo_dir, run_dir, *TWO_RANKS, "trainer.resume=auto"), cwd=tmp_path, nproc=2
    )
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert "resumed from" in resumed.stdout + resumed.stderr
    _same_as_whole(run_dir, whole)
