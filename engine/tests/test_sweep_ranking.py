"""A training sweep over loader speed knobs only ranks its jobs by speed, and says why; any
other sweep keeps summary.rank_by's metric (engine/sweeps/speed_knobs.py). What the sweep
varies is read from its plan (multirun.yaml), keys the summary's overrides leave out included,
and from its rows. Over repeated measurements, jobs whose range overlaps the best's are tied."""

from __future__ import annotations

from pathlib import Path

import pytest
from omegaconf import OmegaConf

from engine.sweeps.plot import plot_sweep
from engine.sweeps.recommend import recommendation
from engine.sweeps.speed_knobs import BASIC_SWEEPER, speed_only
from engine.sweeps.summary import advice, is_stream, notes, table_metric
from engine.sweeps.table import TIED, binomial_spread, mark_tied, rank

OPTUNA = "hydra_plugins.hydra_optuna_sweeper.optuna_sweeper.OptunaSweeper"


def _config(mode: str = "train", rank_by: str | None = None):
    # a metrics group as the template's (its first entry, acc, ranks a training: val/acc)
    metrics = {"acc": {"_target_": "my.metrics.Accuracy"}}
    return OmegaConf.create({"mode": mode, "summary": {"rank_by": rank_by}, "metrics": metrics})


def _plan(folder: Path, task: list[str], params: dict | None = None, sweeper=BASIC_SWEEPER):
    """A sweep dir whose multirun.yaml holds `task` (the command line) and sweeper `params`."""
    sweeper_node = {"_target_": sweeper, "params": params}
    hydra = {"sweeper": sweeper_node, "overrides": {"task": task}, "run": {"dir": "${now:%H}"}}
    OmegaConf.save(OmegaConf.create({"hydra": hydra}), folder / "multirun.yaml")
    return folder


def _rows(*overrides: str) -> list[dict[str, str]]:
    # val/acc apart by float rounding, speed apart for real: the last job is the fastest
    return [
        {
            "job": str(job),
            "status": "ok",
            "overrides": given,
            "val/acc": f"{0.5 + job * 1e-7:.7f}",
            "train/samples_per_s": str(300 + 100 * job),
        }
        for job, given in enumerate(overrides)
    ]


WORKERS = _rows("loader.num_workers=0", "loader.num_workers=1", "loader.num_workers=2")
PERSIST = _rows(
    "++loader.num_workers=2 loader.persistent_workers=true",
    "++loader.num_workers=2 loader.persistent_workers=false loader.pin_memory=false",
)


@pytest.mark.parametrize(
    ("rows", "task", "params"),
    [
        (WORKERS, ["loader.num_workers=0,1,2", "trainer.max_epochs=1"], None),
        (WORKERS, ["trainer.max_epochs=1"], {"loader.num_workers": "0,1,2"}),  # a sweep file
        (PERSIST, ["++loader.num_workers=2", "loader.persistent_workers=true,false"], None),
        # a sweep file over batch sizes too, its batch size fixed on the command line (which
        # wins, as BasicSweeper reads them): ranked by val/acc before
        (
            WORKERS,
            ["loader.batch_size=64"],
            {"loader.num_workers": "0,1,2", "loader.batch_size": "32,64"},
        ),
    ],
)
def test_a_training_sweep_over_speed_knobs_ranks_by_samples_per_s(tmp_path, rows, task, params):
    knobs = speed_only(rows, _plan(tmp_path, task, params))
    metric = table_metric(_config(), knobs)
    assert metric == "train/samples_per_s"
    ranked = rank(rows, metric)
    assert ranked[0]["job"] == rows[-1]["job"]  # the fastest, not the one rounding favoured
    (said,) = notes(ranked, metric, knobs)
    assert said.startswith(
        "Ranked by train/samples_per_s: the jobs differ only in speed knobs (loader."
    )
    assert "summary.rank_by=<metric>" in said
    # what the jobs share, in words their table (val/acc 0.229 against 0.216) cannot contradict
    assert "the same samples in the same order with the same augmentations" in said
    assert "agree" not in said and "a gap between them says nothing about the knobs" in said
    line = recommendation(ranked, metric)
    workers = "2 workers" if rows is WORKERS or "++" in rows[0]["overrides"] else ""
    assert line.endswith("; the best by train/samples_per_s.") and f"({workers}" in line


@pytest.mark.parametrize(
    ("config", "rows", "task", "metric"),
    [
        # batch size changes what is learned
        (_config(), _rows("loader.batch_size=8", "loader.batch_size=16"), [], "val/acc"),
        (_config(), _rows("loader.num_workers=0 model=mlp", "loader.num_workers=2"), [], "val/acc"),
        # the data swept beside the workers: a key the summary's overrides leave out
        (_config(), WORKERS[:2], ["loader.num_workers=0,1", "paths.data_dir=/a,/b"], "val/acc"),
        # a rerun into the dir of a sweep over batch sizes (summary.skip_completed)
        (
            _config(),
            [*_rows("loader.batch_size=8", "loader.batch_size=16")],
            ["loader.num_workers=0,1"],
            "val/acc",
        ),
        (_config(rank_by="val/loss"), WORKERS, ["loader.num_workers=0,1,2"], "val/loss"),
        (_config(mode="benchmark"), WORKERS, ["loader.num_workers=0,1,2"], "loader/samples_per_s"),
    ],
)
def test_any_other_sweep_keeps_the_ranking_metric(tmp_path, config, rows, task, metric) -> None:
    knobs = speed_only(rows, _plan(tmp_path, task))
    assert table_metric(config, knobs) == metric
    assert not any(line.startswith("Ranked by") for line in notes(rows, metric, knobs))


def test_an_optimizing_sweeper_or_an_unread_plan_keeps_the_ranking_metric(tmp_path) -> None:
    """Optuna picks its best trial by summary.rank_by's metric: the summary keeps to it."""
    optuna = _plan(tmp_path, [], {"loader.num_workers": "choice(0,1,2)"}, sweeper=OPTUNA)
    assert speed_only(WORKERS, optuna) == []
    assert speed_only(WORKERS, tmp_path / "no plan") == []
    (tmp_path / "multirun.yaml").write_text("hydra: [not, a, plan\n")
    assert speed_only(WORKERS, tmp_path) == []


def _accuracies(*shares: float, samples: int = 450) -> list[dict[str, str]]:
    """A training sweep's rows: val/acc `shares` measured on `samples` val samples."""
    return [
        {
            "job": str(i),
            "status": "ok",
            "overrides": f"loader.batch_size={16 * 2**i}",
            "val/acc": str(share),
            "val/samples": str(samples),
        }
        for i, share in enumerate(shares)
    ]


def test_a_lead_inside_an_accuracys_sampling_error_is_within_noise_and_not_recommended() -> None:
    """Issue 49's sweep: 0.011 ahead on 450 val images, whose sampling error near 0.9 is
    about +-0.028 (95%): the jobs are tied, the summary says so, and recommends none."""
    rows = mark_tied(rank(_accuracies(0.889, 0.9, 0.80), "val/acc"), "val/acc")
    assert [(r["job"], r[TIED]) for r in rows] == [("1", "yes"), ("0", "yes"), ("2", "no")]
    said = notes(rows, "val/acc")
    assert said[0].startswith(
        "Within noise: jobs 1, 0 are within the sampling error of the best job's val/acc "
        "(95% interval 0.869-0.924 over its 450 val samples): tied = yes"
    )
    assert "none is recommended" in said[0]
    assert advice(rows, [], "val/acc") == []


def test_a_lead_beyond_the_sampling_error_is_recommended_and_said_so() -> None:
    rows = mark_tied(rank(_accuracies(0.95, 0.80, samples=4000), "val/acc"), "val/acc")
    assert [r[TIED] for r in rows] == ["yes", "no"]
    assert notes(rows, "val/acc")[0].startswith("Job 0 is ahead of every other job beyond")
    assert advice(rows, [], "val/acc") == [
        "Recommended: job 0: loader.batch_size=16; the best by val/acc."
    ]


def test_the_sampling_interval_is_wilsons_and_stays_within_0_and_1() -> None:
    near = binomial_spread(0.9, 450)
    assert near.low == pytest.approx(0.8690, abs=1e-3) and near.high == pytest.approx(
        0.9243, abs=1e-3
    )
    assert binomial_spread(1.0, 30).high == 1.0 and binomial_spread(0.0, 30).low == 0.0


THREADS = _rows(
    "loader.num_workers=0 trainer.num_threads=1",
    "loader.num_workers=0 trainer.num_threads=2",
    "loader.num_workers=2 trainer.num_threads=1",
    "loader.num_workers=2 trainer.num_threads=2",
)


def test_the_main_process_threads_are_a_speed_knob_too(tmp_path) -> None:
    """A workers x num_threads sweep was ranked by val/acc, all four jobs tied."""
    plan = _plan(tmp_path, ["loader.num_workers=0,2", "trainer.num_threads=1,2"])
    knobs = speed_only(THREADS, plan)
    assert knobs == ["loader.num_workers", "trainer.num_threads"]
    assert table_metric(_config(), knobs) == "train/samples_per_s"


def test_over_a_stream_the_workers_are_no_speed_knob(tmp_path) -> None:
    """With workers a stream is sharded otherwise: the jobs do not share their samples, so
    the summary ranks by val/acc and never says they do."""
    plan = _plan(tmp_path, ["loader.num_workers=0,2"])
    knobs = speed_only(WORKERS[::2], plan, streamed=True)
    assert knobs == [] and table_metric(_config(), knobs) == "val/acc"
    assert not any("same samples" in line for line in notes(WORKERS[::2], "val/acc", knobs))
    stream = OmegaConf.create(
        {"dataset": {"_target_": "engine.data.datasets.tar_shards.TarShardDataset"}}
    )
    files = OmegaConf.create({"dataset": {"_target_": "engine.data.datasets.csv.CsvDataset"}})
    assert is_stream(stream) and not is_stream(files)
    pinned = _plan(tmp_path, ["loader.pin_memory=true,false"])
    pins = _rows("loader.pin_memory=true", "loader.pin_memory=false")
    assert speed_only(pins, pinned, streamed=True) == ["loader.pin_memory"]


def test_a_sweep_over_seeds_recommends_none_and_says_why() -> None:
    rows = mark_tied(
        rank(_rows("trainer.seed=0", "trainer.seed=1", "trainer.seed=2"), "val/acc"), "val/acc"
    )
    (line,) = advice(rows, [], "val/acc")
    assert line.startswith("None is recommended: the jobs differ by trainer.seed")


SPEED = "loader/samples_per_s"


def _timed_row(
    job: int, median: float, low: float, high: float, status: str = "ok"
) -> dict[str, str]:
    values = [median, low, high] if status == "ok" else ["", "", ""]
    keys = (SPEED, f"{SPEED}_min", f"{SPEED}_max")
    return {
        "job": str(job),
        "status": status,
        "overrides": f"loader.num_workers={job % 3} loader.batch_size={32 * (1 + job // 3)}",
        **{k: str(v) for k, v in zip(keys, values, strict=True)},
    }


def test_jobs_whose_range_overlaps_the_best_are_tied() -> None:
    rows = [
        _timed_row(0, 1000, 900, 1100),
        _timed_row(1, 3000, 2000, 3100),  # best median
        _timed_row(2, 2500, 2900, 2950),  # overlaps the best's 2000-3100
        _timed_row(3, 1900, 1800, 1999),  # just below the best's min
        _timed_row(4, 0, 0, 0, status="same as job 1"),
    ]
    ranked = mark_tied(rank(rows, SPEED), SPEED)
    assert [(r["job"], r["tied"]) for r in ranked] == [
        ("1", "yes"),
        ("2", "yes"),
        ("3", "no"),
        ("0", "no"),
        ("4", ""),
    ]
    said = notes(ranked, SPEED)
    assert "cannot be told apart" in said[0] and "jobs 1, 2 overlap" in said[0]
    assert said[1].startswith("1 job did not run") and "`same as job N`" in said[1]


def test_a_clear_winner_is_said_and_the_plot_draws_ranges(tmp_path: Path) -> None:
    ranked = mark_tied(rank([_timed_row(0, 10, 9, 11), _timed_row(1, 50, 45, 55)], SPEED), SPEED)
    assert notes(ranked, SPEED) == [f"Job 1 is ahead of every other job in every repeat ({SPEED})."]
    plot_sweep(ranked, SPEED, tmp_path / "p.png")
    assert (tmp_path / "p.png").stat().st_size > 0
