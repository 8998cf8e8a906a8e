"""The parts of a loader sweep on hand-made input: the starvation hint's rule, the
candidates `loader.num_workers=auto` measures and how it breaks ties, job folder names, and
the plot of a sweep whose worker counts are not all numbers."""

from __future__ import annotations

from pathlib import Path

from torch.utils.data import DataLoader

from engine.core.launch import job_dir
from engine.data.autotune import choose_workers, worker_candidates
from engine.measure.timing import Spread
from engine.sweeps.plot import plot_sweep
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
