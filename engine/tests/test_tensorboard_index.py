"""TensorBoard run names that say what ran (the index `make tensorboard` serves)."""

from __future__ import annotations

from pathlib import Path

from engine.runs.tensorboard_index import run_name, short_overrides


def test_names_say_the_mode_the_time_and_the_overrides() -> None:
    run = Path("/x/outputs/runs/2026-05-01/12-00-00_ab12cd")
    overrides = ["model=resnet18", "optimizer.lr=0.01", "paths.demo_dir=/d", "hydra.run.dir=/r"]
    assert run_name("train", run, None, overrides) == (
        "train/2026-05-01 12-00-00_ab12cd model=resnet18,lr=0.01"
    )
    assert run_name("train", run, None, []) == "train/2026-05-01 12-00-00_ab12cd"
    evaluated = ["mode=eval", "eval.checkpoint=/x/outputs/runs/2026-05-01/12-00-00_ab12cd/"]
    assert short_overrides(evaluated) == "checkpoint=12-00-00_ab12cd"


def test_a_sweep_job_is_named_by_its_sweep_and_job_folder() -> None:
    sweep = Path("/x/outputs/multiruns/2026-05-01/12-30-00_ef34gh")
    job = sweep / "3_batch_size=64,lr=0.001"
    assert run_name("train", job, sweep, ["loader.batch_size=64"]) == (
        "train/2026-05-01 12-30-00_ef34gh sweep/3_batch_size=64,lr=0.001"
    )
