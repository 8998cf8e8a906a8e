"""Hydra plugins of the `scale` extra: the Optuna sweeper searches with train() (the command
line here, tests/cli.py), keeps its study in SQLite and takes its direction from
summary.rank_by. The submitit launcher, whose jobs are processes of their own:
tests/process/test_launcher_processes.py."""

from __future__ import annotations

import csv
import json
import subprocess
from pathlib import Path

import optuna
import yaml
from hydra import compose, initialize_config_dir
from hydra.core.hydra_config import HydraConfig

from engine.sweeps.direction import direction_problem
from tests.cli import run_cli
from tests.conftest import CONF_DIR, NARROW_MODEL

TINY = (
    "trainer.max_epochs=1",
    "trainer.limit_train_batches=2",
    "loader.num_workers=0",
    NARROW_MODEL,
)


def _multirun(demo_dir: Path, sweep_dir: Path, *args: str) -> subprocess.CompletedProcess:
    return run_cli(
        "-m",
        f"paths.demo_dir={demo_dir}",
        f"hydra.sweep.dir={sweep_dir}",
        *TINY,
        *args,
        cwd=sweep_dir.parent,
    )


def _rows(sweep_dir: Path) -> list[dict[str, str]]:
    with open(sweep_dir / "summary.csv", newline="") as f:
        return list(csv.DictReader(f))


def test_optuna_search_runs_three_trials_on_train(demo_dir: Path, tmp_path: Path) -> None:
    sweep = tmp_path / "search"
    result = _multirun(demo_dir, sweep, "+sweep=optuna", "hydra.sweeper.n_trials=3")
    assert result.returncode == 0, result.stderr[-4000:]
    trials = [json.loads(p.read_text())["val/acc"] for p in sweep.glob("*/metrics.json")]
    assert len(trials) == 3 and len(_rows(sweep)) == 3
    best = yaml.safe_load((sweep / "optimization_results.yaml").read_text())
    assert best["best_value"] == max(trials)  # what train() returned: summary.rank_by
    assert set(best["best_params"]) == {
        "optimizer.lr",
        "optimizer.weight_decay",
        "loader.batch_size",
    }


def test_optuna_keeps_its_study_in_sqlite_and_minimizes_a_loss(demo_dir, tmp_path) -> None:
    """The storage preset works with the pinned SQLAlchemy, and ranking by a loss makes the
    study minimize it (hydra.sweeper.direction is derived from summary.rank_by)."""
    sweep, storage = tmp_path / "search", f"sqlite:///{tmp_path / 'optuna.db'}"
    args = ("+sweep=optuna", "hydra.sweeper.n_trials=2", f"hydra.sweeper.storage={storage}")
    result = _multirun(demo_dir, sweep, *args, "summary.rank_by=val/loss")
    assert result.returncode == 0, result.stderr[-4000:]
    study = optuna.load_study(study_name="train", storage=storage)
    assert study.direction == optuna.study.StudyDirection.MINIMIZE and len(study.trials) == 2
    losses = [json.loads(p.read_text())["val/loss"] for p in sweep.glob("*/metrics.json")]
    assert study.best_value == min(losses)


def test_a_sweep_direction_against_the_ranking_is_refused(make_cfg) -> None:
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        cfg = compose(
            config_name="config",
            overrides=["+sweep=optuna", "summary.rank_by=val/loss"],
            return_hydra_config=True,
        )
        assert cfg.hydra.sweeper.direction == "minimize"  # derived
        wrong = compose(
            config_name="config",
            overrides=[
                "+sweep=optuna",
                "summary.rank_by=val/loss",
                "hydra.sweeper.direction=maximize",
            ],
            return_hydra_config=True,
        )
    HydraConfig.instance().set_config(wrong)
    try:
        problem = direction_problem(wrong)
    finally:
        HydraConfig.instance().cfg = None  # type: ignore[assignment]
    assert problem is not None and "set hydra.sweeper.direction=minimize" in problem
