"""The parts of a loader sweep on hand-made input: the starvation hint's rule, the
candidates `loader.num_workers=auto` measures and how it breaks ties, job folder names, and
the plot of a sweep whose worker counts are not all numbers, the recommended setting, the
HParams columns, and which keys a sweep varies."""

from __future__ import annotations

from pathlib import Path

from torch.utils.data import DataLoader

from engine.core.launch import job_dir
from engine.data.autotune import choose_workers, worker_candidates
from engine.measure.timing import Spread
from engine.sweeps.board import columns
from engine.sweeps.plot import plot_sweep, swept_keys
from engine.sweeps.recommend import recommendation, recommended
from engine.training.starvation import starvation_hint


def test_the_hint_follows_the_measured_wait_and_the_loaders_knobs() -> None:
    """The rule without stage times (trainer.pipeline_timing=false) on data-wait fractions it
    is given: silent at or under the threshold."""
    loader = DataLoader(range(8), num_workers=2, prefetch_factor=2)
    assert starvation_hint(0.2, 0.2, loader) is None
    hint = starvation_hint(0.41, 0.2, loader)
    assert hint is not None and "waited for data 41% of the epoch" in hint
    assert "persistent_workers=true" in hint and "prefetch_factor (now 2)" in hint


def test_worker_candidates_and_ties() -> None:
    assert worker_candidates(1) == [0, 1]
    assert worker_candidates(6) == [0, 1, 2, 4, 6]
    rates = {0: Spread(100, 90, 110), 1: Spread(180, 150, 200), 2: Spread(190, 185, 195)}
    assert choose_workers(rates) == 1  # its range overlaps the best's: fewer workers
    rates[1] = Spread(180, 170, 184)
    assert choose_workers(rates) == 2  # told apart by every repeat


def test_job_dir_names_are_short() -> None:
    assert (
        job_dir(3, "loader.batch_size=64,loader.num_workers=2") == "3_batch_size=64,num_workers=2"
    )
    assert job_dir(0, "") == "0"
    assert "/" not in job_dir(1, "dataset.root=/data/x")
    # a list value keeps its commas (it was cut into widths=[8,16=,32]=)
    assert job_dir(2, "debug=fast,model.widths=[8,16,32]") == "2_debug=fast,widths=[8,16,32]"
    # overrides that differ past the cut (two sweeps in one dir, both with a job 0) never
    # share a folder
    long = "dataset.csv=/data/" + "x" * 90 + "/k.csv,dataset.fold="
    first, second = job_dir(0, long + "0"), job_dir(0, long + "2")
    assert first != second and len(first) == len(second) == len("0_") + 80
    assert job_dir(0, long + "0") == first  # the same overrides: the same folder


def test_plot_takes_non_numeric_worker_counts(tmp_path: Path) -> None:
    rows = [
        {"status": "ok", "job": "0", "overrides": "loader.num_workers=auto", "m": "5"},
        {"status": "ok", "job": "1", "overrides": "loader.num_workers=2", "m": "4"},
        {"status": "failed", "job": "2", "overrides": "loader.num_workers=10", "m": ""},
    ]
    plot_sweep(rows, "m", tmp_path / "p.png")
    assert (tmp_path / "p.png").stat().st_size > 0


SPEED = "loader/samples_per_s"


def _row(job: int, workers: int, rss: float, tied: str) -> dict[str, str]:
    return {
        "job": str(job),
        "status": "ok",
        "overrides": f"loader.batch_size=32 loader.num_workers={workers}",
        "loader/peak_rss_mb": str(rss),
        "tied": tied,
    }


def test_the_recommendation_takes_fewest_workers_then_least_memory() -> None:
    rows = [_row(0, 4, 100, "yes"), _row(1, 2, 900, "yes"), _row(2, 2, 300, "yes")]
    rows.append(_row(3, 0, 50, "no"))  # fewer workers, but slower in every repeat
    assert recommended(rows)["job"] == "2"
    line = recommendation(rows, SPEED)
    assert line == (
        "Recommended: job 2: loader.num_workers=2 (2 workers, 300 MB peak RSS); of the 3 jobs "
        f"tied with the best by {SPEED}, the fewest workers, then the least memory."
    )
    assert recommendation([{"status": "failed", "job": "0", "overrides": ""}], SPEED) is None


def test_columns_put_the_swept_keys_first_and_leave_out_shared_values() -> None:
    runs = [
        {"dataset": "tensor", "data.input_shape": "[3, 8, 8]", "loader.batch_size": 8, "x": True},
        {"dataset": "csv", "data.input_shape": "[3, 9, 9]", "loader.batch_size": 16, "x": True},
    ]
    infos = columns(runs, swept=["loader.batch_size", "dataset"])
    assert [(i.name, i.differs) for i in infos] == [
        ("loader.batch_size", True),
        ("dataset", True),
        ("data.input_shape", False),  # differs, but as a consequence: after the swept keys
    ]  # x: the same in every job, left out
    assert (infos[0].domain_interval.min_value, infos[0].domain_interval.max_value) == (8, 16)
    assert sorted(infos[1].domain_discrete) == ["csv", "tensor"]


def test_a_key_only_some_jobs_override_is_swept() -> None:
    rows = [{"overrides": "dataset.fold=0 model=mlp"}, {"overrides": "dataset.fold=0"}]
    rows.append({"overrides": "+dataset.fold_seed=1 dataset.fold=0"})
    assert swept_keys(rows) == ["model", "dataset.fold_seed"]  # dataset.fold: the same in all
