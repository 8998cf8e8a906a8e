"""What one loader sweep of the reference project (`python train.py -m mode=benchmark
loader.num_workers=0,2 loader.batch_size=... loader.persistent_workers=true,false`) leaves for
the scripts and people that read it: a metrics.json in every job dir, the HParams table
TensorBoard shows, the plot's title and the recommended setting, and nothing beside them that a
user's folder is not kept from (the parts on hand-made rows: test_sweep_parts.py,
test_sweep_ranking.py)."""

from __future__ import annotations

import csv
import json
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest
from google.protobuf.json_format import MessageToDict
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from engine.runs.run_lock import SWEEP_FILES, SWEEP_LOCK_NAME
from engine.runs.tensorboard import board_tag
from engine.sweeps.plot import parse_overrides, title_counts
from engine.sweeps.recommend import recommendation, recommended
from engine.sweeps.table import mark_tied, rank
from engine_dev.cli import run_script
from tests.conftest import TRAIN, reference_args
from tests.hparams_table import hparams_table

METRIC = "loader/samples_per_s"
SWEPT = {"loader.num_workers", "loader.batch_size", "loader.persistent_workers"}


@dataclass
class Sweep:
    result: subprocess.CompletedProcess
    log_dir: Path
    dir: Path
    rows: dict[str, dict[str, str]]  # summary.csv by job number
    jobs: dict[str, Path]  # job dirs by job number


@pytest.fixture(scope="module")
def sweep(demo_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Sweep:
    log_dir = tmp_path_factory.mktemp("outputs")
    result = run_script(
        TRAIN,
        "-m",
        *reference_args(demo_dir, log_dir, "mode=benchmark"),
        "benchmark.batches=2",
        "benchmark.warmup=0",
        "benchmark.repeats=2",
        "loader.num_workers=0,2",
        "loader.batch_size=8,16",
        "loader.persistent_workers=true,false",
        cwd=log_dir,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    (sweep_dir,) = log_dir.glob("multiruns/*/*")
    with open(sweep_dir / "summary.csv", newline="") as f:
        rows = {r["job"]: r for r in csv.DictReader(f)}
    jobs = {p.name.partition("_")[0]: p for p in sweep_dir.iterdir() if p.name[0].isdigit()}
    return Sweep(result, log_dir, sweep_dir, rows, jobs)


def test_every_job_dir_holds_its_metrics_json(sweep: Sweep) -> None:
    assert sorted(sweep.jobs, key=int) == [str(n) for n in range(8)]
    metrics = {job: json.loads((d / "metrics.json").read_text()) for job, d in sweep.jobs.items()}
    # persistent_workers does not apply at num_workers=0: jobs 1 and 3 run as 0 and 2
    reused = {job: m["same_as"] for job, m in metrics.items() if "same_as" in m}
    assert reused == {"1": 0, "3": 2}
    for job, earlier in reused.items():
        assert sweep.rows[job]["status"] == f"same as job {earlier}"
        assert metrics[job] == metrics[str(earlier)] | {"same_as": earlier}
    assert all(metrics[j][METRIC] > 0 for j in sweep.jobs)


def test_every_file_the_sweep_leaves_beside_its_jobs_is_protected(sweep: Sweep) -> None:
    """A sweep dir no multirun has held is refused when it holds one of these (the engine's
    test_run_dir_owner.py): the list must name all that a multirun writes there."""
    beside = {p.name for p in sweep.dir.iterdir()} - {p.name for p in sweep.jobs.values()}
    assert {"summary.csv", "summary.md", "multirun.yaml"} <= beside
    assert beside - SWEEP_FILES == {SWEEP_LOCK_NAME}


@pytest.mark.parametrize("served", ["sweep dir", "tensorboard index"])
def test_hparams_table_shows_the_swept_keys_and_short_trial_names(sweep: Sweep, served) -> None:
    logdir = sweep.dir if served == "sweep dir" else sweep.log_dir / "tensorboard"
    experiment, groups = hparams_table(logdir)
    columns = [h.name for h in experiment.hparam_infos]
    # what the sweep varied, first; nothing every job shares (dataset, model, benchmark.batches)
    assert set(columns) == SWEPT and all(h.differs for h in experiment.hparam_infos)
    ran = [job for job, row in sweep.rows.items() if row["status"] == "ok"]
    assert {g.name for g in groups.session_groups} == {
        f"{sweep.jobs[job].name} {sweep.dir.name}" for job in ran
    }
    for group in groups.session_groups:
        job = group.name.partition("_")[0]
        settings = parse_overrides(sweep.rows[job]["overrides"])
        shown = {k: MessageToDict(v) for k, v in group.hparams.items()}
        persistent = settings["loader.persistent_workers"].lower() == "true"
        assert shown["loader.persistent_workers"] is persistent  # a bool, not 1.0
        assert shown["loader.batch_size"] == float(settings["loader.batch_size"])
        values = {m.name.tag: m.value for m in group.metric_values}
        # every loader figure is a column of the table, each job's own value
        assert set(values) == {m.name.tag for m in experiment.metric_infos}
        written = json.loads((sweep.jobs[job] / "metrics.json").read_text())
        on_board = {board_tag(key): value for key, value in written.items()}  # ~pipeline/...
        assert set(values) == set(on_board)
        assert values == pytest.approx(on_board, rel=1e-6)


def test_the_sweep_board_holds_the_summary_plot(sweep: Sweep) -> None:
    events = EventAccumulator(str(sweep.dir / "tensorboard"))
    events.Reload()
    assert events.Tags()["images"] == ["sweep/summary"]


def test_plot_title_says_what_became_of_each_job(sweep: Sweep) -> None:
    rows = list(sweep.rows.values())
    ok = [r for r in rows if r["status"] == "ok"]
    assert title_counts(rows, ok) == "6 jobs finished, 2 same as an earlier job"
    failed = [{"status": "failed"}, {"status": "same as job 0"}, {"status": "ok"}]
    assert title_counts(failed, failed[2:]) == "1 jobs finished, 1 same as an earlier job, 1 failed"


def test_the_summary_ends_with_the_recommended_setting(sweep: Sweep) -> None:
    ranked = mark_tied(rank(list(sweep.rows.values()), METRIC), METRIC)
    tied = [r for r in ranked if r["tied"] == "yes"]
    best = recommended(ranked)
    fewest = min(int(parse_overrides(r["overrides"])["loader.num_workers"]) for r in tied)
    assert best in tied and parse_overrides(best["overrides"])["loader.num_workers"] == str(fewest)
    line = recommendation(ranked, METRIC)
    given = parse_overrides(best["overrides"])
    workers = given["loader.num_workers"]
    setting = f"loader.batch_size={given['loader.batch_size']} loader.num_workers={workers}"
    if workers != "0":  # persistent_workers does not apply with 0 workers: left out then
        setting += f" loader.persistent_workers={given['loader.persistent_workers']}"
    assert line.startswith(f"Recommended: job {best['job']}: {setting} ({workers} workers, ")
    summary = (sweep.result.stderr + sweep.result.stdout).partition("Sweep summary (")[2]
    assert summary.rstrip().splitlines()[-1].endswith(line)
    assert line in (sweep.dir / "summary.md").read_text()


def test_a_single_run_is_named_by_its_folder_and_overrides(demo_dir: Path, tmp_path: Path) -> None:
    run = tmp_path / "12-00-00_ab12cd"
    result = run_script(
        TRAIN,
        "mode=benchmark",
        "benchmark.batches=1",
        "benchmark.warmup=0",
        "benchmark.repeats=1",
        "loader.batch_size=8",
        *reference_args(demo_dir, tmp_path),
        f"hydra.run.dir={run}",
        cwd=tmp_path,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    experiment, groups = hparams_table(run)
    assert [g.name for g in groups.session_groups] == [
        "12-00-00_ab12cd batches=1,warmup=0,repeats=1,batch_size=8"
    ]
    assert "loader.batch_size" in {h.name for h in experiment.hparam_infos}  # its own columns
