"""DDP on CPU (gloo): a 2-process torchrun job writes one run dir from rank 0 whose val metrics
equal a single-process evaluation of its checkpoint; uneven streams keep the ranks identical."""

from __future__ import annotations

import csv
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import torch.multiprocessing as mp
from omegaconf import OmegaConf

from engine.runs.checkpoint_files import load_checkpoint
from engine.training.assemble import assemble
from engine.training.batches import mover_for
from engine.training.evaluate import evaluate
from engine.training.totals import PassTotals
from engine_dev.hostile import corrupt_tree
from src.metrics.multilabel import F1, MeanAveragePrecision
from tests import ddp_probe
from tests.cli import outside_the_checkout
from tests.conftest import NARROW_MODEL

ROOT = Path(__file__).resolve().parents[2]
LAUNCH_VARIABLES = (
    "RANK",
    "WORLD_SIZE",
    "LOCAL_RANK",
    "LOCAL_WORLD_SIZE",
    "MASTER_ADDR",
    "MASTER_PORT",
    "TORCHELASTIC_RUN_ID",
)


def torchrun(
    *args: str,
    cwd: Path,
    nproc: int = 2,
    script: Path = ROOT / "train.py",
    deadline_s: float | None = None,
    **env_vars: str,
) -> subprocess.CompletedProcess:
    """`torchrun --standalone --nproc_per_node=nproc train.py args`, in a process group of its
    own: when the test is interrupted (pytest-timeout, the suite's one hang guard, or Ctrl-C),
    or past `deadline_s` where one is given (the stress run counts hangs), the whole group
    (agent, ranks, their workers) is killed, so nothing is left running."""
    env = {k: v for k, v in os.environ.items() if k not in LAUNCH_VARIABLES} | env_vars
    command = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--standalone",
        f"--nproc_per_node={nproc}",
        str(script),
        *outside_the_checkout(args, cwd),
    ]
    job = subprocess.Popen(
        command,
        cwd=cwd,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        out, err = job.communicate(timeout=deadline_s)
    except BaseException:
        os.killpg(job.pid, signal.SIGKILL)
        job.communicate()
        raise
    return subprocess.CompletedProcess(command, job.returncode, out, err)


def single_process_eval(run: Path, out: Path) -> dict[str, float]:
    """Val metrics of `run`'s last checkpoint, evaluated here in one process with its config."""
    state = load_checkpoint(run / "checkpoints" / "last.pt")
    cfg = OmegaConf.create(state["config"])
    cfg.paths.output_dir = str(out)
    parts = assemble(cfg)
    parts.model.load_state_dict(state["model"])  # plain keys: no DDP `module.` prefix
    move = mover_for(parts)
    return evaluate(
        parts.model, parts.val_loader, move, parts.precision, parts.criterion, parts.metrics
    )


def _csv_run(demo_dir: Path, val_csv: Path) -> tuple[str, ...]:
    """A 2-epoch job on the demo CSV with the val split `val_csv`."""
    return (
        f"paths.demo_dir={demo_dir}",
        "dataset=csv",
        f"dataset.val_csv={val_csv}",
        f"dataset.root={demo_dir}",
        "trainer.max_epochs=2",
        "loader.batch_size=8",
        "loader.num_workers=0",
        NARROW_MODEL,
    )


@pytest.fixture(scope="module")
def csv_job(demo_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """A 2-epoch torchrun job on an odd-sized val split (29: shares of 15 and 14, no padding):
    also the uninterrupted job the stopped and resumed one is compared with."""
    logs = tmp_path_factory.mktemp("ddp")
    rows = (demo_dir / "val.csv").read_text().splitlines()
    (logs / "val29.csv").write_text("\n".join(rows[:30]) + "\n")  # header + 29 samples
    result = torchrun(*_csv_run(demo_dir, logs / "val29.csv"), f"paths.log_dir={logs}", cwd=logs)
    assert result.returncode == 0, result.stderr[-4000:]
    return logs, result.stdout + result.stderr


def test_torchrun_job_has_one_run_dir_written_by_rank_0(csv_job: tuple[Path, str]) -> None:
    logs, output = csv_job
    (run,) = (p.parent for p in logs.glob("runs/*/*/.hydra"))
    assert [p.parent for p in logs.glob("runs/*/*/*") if p.name == "metrics.json"] == [run]
    assert len(list((run / "tensorboard").glob("events.out.tfevents.*"))) == 1
    assert output.count("epoch 2/2") == 1 and "x 2 ranks = 16 per step" in output
    log = (run / "train.log").read_text()
    assert log.count("epoch 1/2") == 1 and log.count("[engine.runs.outputs][INFO] - metrics:") == 1
    state = load_checkpoint(run / "checkpoints" / "last.pt")
    assert state["world_size"] == 2 and state["epoch"] == 2
    assert not any(key.startswith("module.") for key in state["model"])
    # 48 train samples: 24 per rank, 3 batches of 8, one optimizer step per batch
    assert state["step"] == 6


def test_torchrun_val_metrics_equal_single_process_eval(csv_job, tmp_path: Path) -> None:
    logs, _ = csv_job
    (metrics_file,) = logs.glob("runs/*/*/metrics.json")
    metrics = json.loads(metrics_file.read_text())
    alone = single_process_eval(metrics_file.parent, tmp_path)
    assert alone["val/acc"] == metrics["val/acc"]  # 29 samples, each counted once
    assert alone["val/loss"] == pytest.approx(metrics["val/loss"], rel=1e-6)


def test_torchrun_stream_over_2_ranks_x_2_workers(demo_dir: Path, tmp_path: Path) -> None:
    """3 train shards of 16: rank 0 reads 2, rank 1 one (4 vs 2 batches): Join, then align.
    The workers start by forkserver (forking a rank can hang: CPython gh-112275), said once."""
    result = torchrun(
        f"paths.demo_dir={demo_dir}",
        f"paths.log_dir={tmp_path}",
        "dataset=iterable",
        "trainer.max_epochs=2",
        "loader.batch_size=8",
        "loader.num_workers=2",
        NARROW_MODEL,
        cwd=tmp_path,
    )
    assert result.returncode == 0, result.stderr[-4000:]
    said = (result.stdout + result.stderr).count(
        "multiprocessing_context=forkserver under torchrun"
    )
    assert said == 1  # rank 0's log; the other ranks log warnings only
    (metrics_file,) = tmp_path.glob("runs/*/*/metrics.json")
    metrics = json.loads(metrics_file.read_text())
    state = load_checkpoint(metrics_file.parent / "checkpoints" / "last.pt")
    assert state["step"] == 8  # the longer rank's 4 steps per epoch
    alone = single_process_eval(metrics_file.parent, tmp_path / "eval")
    assert alone["val/acc"] == metrics["val/acc"]
    assert alone["val/loss"] == pytest.approx(metrics["val/loss"], rel=1e-6)


def test_ranks_with_uneven_batches_end_the_epoch_identical(tmp_path: Path) -> None:
    mp.spawn(ddp_probe.uneven_epoch, args=(2, str(tmp_path / "init"), str(tmp_path)), nprocs=2)
    first, second = (torch.load(tmp_path / f"rank{r}.pt") for r in range(2))
    assert first["active"] and (first["own_step"], second["own_step"]) == ddp_probe.BATCHES
    assert first["step"] == second["step"] == max(ddp_probe.BATCHES)
    assert first["lr"] == second["lr"]
    for key, tensor in first["model"].items():
        assert torch.equal(tensor, second["model"][key]), key
    for param, moments in first["optimizer"].items():
        for name, value in moments.items():
            assert torch.equal(value, second["optimizer"][param][name]), (param, name)


def test_gathered_metrics_over_ranks_equal_one_process_on_every_row(tmp_path: Path) -> None:
    world = len(ddp_probe.GATHERED_ROWS)
    mp.spawn(
        ddp_probe.gathered_pass, args=(world, str(tmp_path / "init"), str(tmp_path)), nprocs=world
    )
    every = [ddp_probe.pass_rows(rank) for rank in range(world)]
    one = PassTotals(torch.device("cpu"), {"map": MeanAveragePrecision(), "f1": F1(0.5)})
    one.add(torch.tensor(0.5), torch.cat([x for x, _ in every]), torch.cat([t for _, t in every]))
    expected = one.means("val", "")
    for rank in range(world):
        assert torch.load(tmp_path / f"gathered{rank}.pt") == pytest.approx(expected, abs=1e-6)


FAULTS = ROOT / "tests" / "ddp_faults.py"


@pytest.fixture(scope="module")
def faulty_job(demo_dir: Path, tmp_path_factory: pytest.TempPathFactory):
    """A job on a folder with three unreadable train files (dataset.on_error=skip) whose rank 1
    meets a NaN loss (trainer.max_nonfinite_steps=1)."""
    tmp = tmp_path_factory.mktemp("faulty")
    root, bad = corrupt_tree(demo_dir, tmp / "tree")
    result = torchrun(
        f"paths.demo_dir={demo_dir}",
        f"paths.log_dir={tmp / 'logs'}",
        f"dataset.root={root}",
        "dataset.on_error=skip",
        "dataset.max_bad_fraction=0.1",
        "loader.batch_size=8",
        "loader.num_workers=0",
        "trainer.max_epochs=1",
        "trainer.max_nonfinite_steps=1",
        NARROW_MODEL,
        cwd=tmp,
        script=FAULTS,
        NAN_RANK="1",
    )
    assert result.returncode == 0, result.stderr[-3000:]
    return tmp / "logs", bad, result.stdout + result.stderr


def test_torchrun_bad_samples_report_pools_every_rank(faulty_job) -> None:
    logs, bad, _ = faulty_job
    (report,) = logs.glob("runs/*/*/bad_samples.csv")
    with open(report, newline="") as f:
        assert {row["path"] for row in csv.DictReader(f)} == bad  # both ranks' finds


def test_a_nan_on_one_rank_is_skipped_by_all(faulty_job) -> None:
    """Without agreeing, rank 0 would enter the gradient all-reduce that rank 1 skips: a hang."""
    _, _, output = faulty_job
    assert "not finite on another rank" in output and "step skipped (1 of 1 allowed)" in output
