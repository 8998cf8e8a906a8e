"""DDP on CPU (gloo), through the template: uneven batches keep the ranks identical; gathered
metrics equal one process's; bad files and a NaN on one rank are pooled and agreed on. A stream
over 2 ranks x 2 workers: test_shard_streaming_processes.py. The engine's own suite proves one
run dir per job, its eval and stop/resume on its reference project."""

from __future__ import annotations

import csv
import shutil
import subprocess
from pathlib import Path

import pytest
import torch
import torch.multiprocessing as mp
from omegaconf import OmegaConf

from engine.api import assemble
from engine.training.totals import PassTotals
from engine_dev.api import evaluate, load_checkpoint, mover_for, run_child
from engine_dev.hostile import corrupt_tree
from src.metrics.multilabel import F1, MeanAveragePrecision
from tests import ddp_probe
from tests.cli import outside_the_checkout
from tests.conftest import tiny_model

ROOT = Path(__file__).resolve().parents[2]


def torchrun(
    *args: str,
    cwd: Path,
    nproc: int = 2,
    script: Path = ROOT / "train.py",
    deadline_s: float | None = None,
    **env_vars: str,
) -> subprocess.CompletedProcess:
    """`torchrun --standalone --nproc_per_node=nproc train.py args` (engine_dev.processes:
    its group is killed when the test is interrupted or past `deadline_s`), its runs kept out
    of the checkout."""
    args = tuple(outside_the_checkout(args, cwd))
    return run_child(script, *args, cwd=cwd, nproc=nproc, deadline_s=deadline_s, **env_vars)


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
    """A job on a folder with three unreadable train files (dataset.decode.on_error=skip) whose rank 1
    meets a NaN loss (trainer.max_nonfinite_steps=1)."""
    tmp = tmp_path_factory.mktemp("faulty")
    root, bad = corrupt_tree(demo_dir, tmp / "tree")
    result = torchrun(
        f"paths.demo_dir={demo_dir}",
        f"paths.log_dir={tmp / 'logs'}",
        f"dataset.root={root}",
        "dataset.decode.on_error=skip",
        "dataset.decode.max_bad_fraction=0.1",
        "loader.batch_size=8",
        "loader.num_workers=0",
        "trainer.max_epochs=1",
        "trainer.max_nonfinite_steps=1",
        *tiny_model(demo_dir),
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


def test_a_batch_left_out_on_one_rank_stops_the_job_in_one_line(demo_dir: Path, tmp_path: Path):
    """Every sample of some of rank 0's batches unreadable (on_error=skip leaves them out),
    none of rank 1's: rank 0 would run out first and wait in an all-reduce rank 1 never
    joins (a hang); the ranks compare what they left out and both stop naming the fix."""
    root = Path(shutil.copytree(demo_dir / "imagefolder", tmp_path / "tree"))
    first = sorted((root / "train" / "circle").iterdir())
    for image in first[::2]:  # rank 0's share of a sequential order (every 2nd position)
        image.write_bytes(b"")
    result = torchrun(
        f"paths.demo_dir={demo_dir}",
        f"paths.log_dir={tmp_path / 'logs'}",
        f"dataset.root={root}",
        "dataset.decode.on_error=skip",
        "dataset.decode.max_bad_fraction=0.5",
        "sampler=sequential",
        "loader.shuffle=false",
        "loader.batch_size=2",
        "loader.num_workers=0",
        "trainer.max_epochs=1",
        *tiny_model(demo_dir),
        cwd=tmp_path,
        deadline_s=240,
    )
    assert result.returncode != 0
    said = "was unreadable and left out (dataset.decode.on_error=skip) on some ranks and not"
    assert said in result.stderr, result.stderr[-3000:]
