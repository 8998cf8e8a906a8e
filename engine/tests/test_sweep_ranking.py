"""A training sweep over loader speed knobs only ranks its jobs by speed, and says why; any
other sweep keeps summary.rank_by's metric (engine/sweeps/speed_knobs.py)."""

from __future__ import annotations

import pytest
from omegaconf import OmegaConf

from engine.sweeps.recommend import recommendation
from engine.sweeps.summary import notes, table_metric
from engine.sweeps.table import rank


def _config(mode: str = "train", rank_by: str | None = None):
    # a metrics group as the template's (its first entry, acc, ranks a training: val/acc)
    metrics = {"acc": {"_target_": "my.metrics.Accuracy"}}
    return OmegaConf.create({"mode": mode, "summary": {"rank_by": rank_by}, "metrics": metrics})


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


@pytest.mark.parametrize(
    "rows",
    [
        WORKERS,
        _rows(
            "loader.num_workers=2 loader.persistent_workers=true",
            "loader.num_workers=2 loader.persistent_workers=false loader.pin_memory=false",
        ),
    ],
)
def test_a_training_sweep_over_speed_knobs_ranks_by_samples_per_s(rows) -> None:
    metric = table_metric(_config(), rows)
    assert metric == "train/samples_per_s"
    ranked = rank(rows, metric)
    assert ranked[0]["job"] == rows[-1]["job"]  # the fastest, not the one rounding favoured
    (said,) = notes(ranked, metric)
    assert said.startswith(
        "Ranked by train/samples_per_s: the jobs differ only in loader speed knobs (loader."
    )
    assert "summary.rank_by=<metric>" in said
    assert recommendation(ranked, metric).endswith("; the best by train/samples_per_s.")


@pytest.mark.parametrize(
    ("config", "rows", "metric"),
    [
        # batch size changes what is learned
        (_config(), _rows("loader.batch_size=8", "loader.batch_size=16"), "val/acc"),
        (_config(), _rows("loader.num_workers=0 model=mlp", "loader.num_workers=2"), "val/acc"),
        (_config(rank_by="val/loss"), WORKERS, "val/loss"),  # the user's choice stands
        (_config(mode="benchmark"), WORKERS, "loader/samples_per_s"),
        (_config(), WORKERS[:1], "val/acc"),  # one job so far: nothing is varied yet
    ],
)
def test_any_other_sweep_keeps_the_ranking_metric(config, rows, metric) -> None:
    assert table_metric(config, rows) == metric
    assert not any(line.startswith("Ranked by") for line in notes(rows, metric))
