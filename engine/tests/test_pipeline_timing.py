"""Per-stage pipeline timings (trainer.pipeline_timing): each batch's worker stages travel with
it, the main process adds wait, h2d and step, and a pipeline built slow at one stage (a sleep
in read, a slow decode, a heavy transform, a huge collate, a slow copy) gets the hint naming
that stage and its fix. End to end on the reference project: TensorBoard's points, the
metrics, pipeline.csv, the epoch line and the report's PNG drawn from the run's own rows."""

from __future__ import annotations

import csv
import logging
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
from torch.utils.data import default_collate

from engine.data.datasets.base import MapDataset
from engine.data.loader_settings import LoaderSettings
from engine.data.loaders import make_loader
from engine.data.seeded import seeded
from engine.data.transforms import TimedCompose
from engine.measure.stages import StageTimes, split_times, timed_stage
from engine.metric_keys import PIPELINE_KEYS
from engine.modes import pipeline_report
from engine.modes.benchmark import BenchmarkSettings, time_loader
from engine.sweeps.plot import plot_stages
from engine.training.limiting_stage import limiting_stage
from engine.training.pipeline_timing import PipelineTimes
from engine.training.starvation import limit_hint
from reference.loop import train

SLOW_S = 0.004  # the slow stage's sleep per sample (per batch for collate and the copy)


@timed_stage("read")
def _slow_read(seconds: float) -> bytes:
    time.sleep(seconds)
    return b"x"


class Slowed(MapDataset):
    """8 tiny images whose read and decode take the seconds asked."""

    def __init__(self, read_s: float = 0.0, decode_s: float = 0.0, transform=None) -> None:
        self.read_s, self.decode_s, self.transform = read_s, decode_s, transform
        self.classes = ["a", "b"]

    def __len__(self) -> int:
        return 8

    def __getitem__(self, index: int) -> tuple[torch.Tensor, int]:
        _slow_read(self.read_s)
        time.sleep(self.decode_s)  # the decode: fetch time outside read and transform
        image = torch.full((3, 8, 8), index, dtype=torch.uint8)
        return (self.transform(image) if self.transform else image), index % 2


class Heavy:
    """A transform step that takes SLOW_S."""

    def __call__(self, image: torch.Tensor) -> torch.Tensor:
        time.sleep(SLOW_S)
        return image


def _slow_collate(samples: list[Any]) -> Any:
    time.sleep(SLOW_S * len(samples))
    return default_collate(samples)


def _loader(dataset: MapDataset, workers: int = 0, collate: Callable | None = None):
    settings = LoaderSettings(4, False, workers, collate, False, False, None, False, 0, None)
    return make_loader(seeded(dataset, 0), settings, None, False, time_stages=True)


def _run_pass(loader, move: Callable[[Any], Any] = lambda batch: batch) -> PipelineTimes:
    """One pass as the training loop makes it: arrivals, the copy, a quick step."""
    times = PipelineTimes(torch.device("cpu"))
    for _ in times.stepping(map(times.mover(move), times.arrivals(iter(loader))), 0):
        pass
    return times


@pytest.mark.parametrize("workers", [0, 2])
def test_each_batch_carries_its_stage_times_from_its_worker(workers: int) -> None:
    loader = _loader(Slowed(read_s=SLOW_S, transform=TimedCompose([Heavy()])), workers)
    seen = []
    for batch in loader:
        fields, times = split_times(batch)
        assert isinstance(times, StageTimes) and len(fields) == 2  # inputs, labels
        seen.append(times)
    assert [t.samples for t in seen] == [4, 4]
    assert {t.worker for t in seen} == ({-1} if workers == 0 else {0, 1})
    for t in seen:  # each stage at least its sleeps, and the steps named
        assert t.seconds["read"] >= 4 * SLOW_S and t.seconds["transform"] >= 4 * SLOW_S
        assert t.steps["Heavy"] >= 4 * SLOW_S and t.ended >= t.began


@pytest.mark.parametrize(
    ("stage", "build", "move", "fix"),
    [
        ("read", lambda: _loader(Slowed(read_s=SLOW_S)), None, "shards"),
        ("decode", lambda: _loader(Slowed(decode_s=SLOW_S)), None, "dataset=cache"),
        (
            "transform",
            lambda: _loader(Slowed(transform=TimedCompose([Heavy()]))),
            None,
            "lighten or drop Heavy",
        ),
        ("collate", lambda: _loader(Slowed(), collate=_slow_collate), None, "collate_fn"),
        ("h2d", lambda: _loader(Slowed()), lambda b: time.sleep(8 * SLOW_S) or b, "uint8"),
    ],
)
def test_a_pipeline_slow_at_one_stage_is_named_with_its_fix(stage, build, move, fix) -> None:
    loader = build()
    whole = _run_pass(loader, move or (lambda batch: batch)).epoch()
    limit = limiting_stage(whole.metrics(), whole.transform_steps(), loader)
    assert limit is not None and limit.stage == stage
    hint = limit_hint(limit, 0.9, 0.2)
    assert f"and {stage} limits it" in hint and fix in hint


def test_a_training_logs_its_stages_and_draws_them(
    reference_cfg, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog
) -> None:
    """A training whose reads are slow: pipeline/<stage>_ms at every logged step and in its
    metrics, one pipeline.csv row per batch, the epoch line naming read, and the report's
    picture drawn from those rows."""
    import engine.data.decode as decode

    real = decode.read_regular_file.__wrapped__

    @timed_stage("read")
    def slow(path: Any, max_bytes: int | None) -> bytes:
        time.sleep(0.01)
        return real(path, max_bytes)

    monkeypatch.setattr(decode, "read_regular_file", slow)
    cfg = reference_cfg(
        "timed", "trainer.max_epochs=1", "trainer.limit_train_batches=3", "logger=tensorboard"
    )
    with caplog.at_level(logging.INFO):
        metrics = train(cfg)
    run = tmp_path / "timed"
    assert set(PIPELINE_KEYS) <= set(metrics) and metrics["pipeline/read_ms"] >= 10
    board = EventAccumulator(str(run / "tensorboard")).Reload()
    assert len(board.Scalars("pipeline/read_ms")) == 3  # log_every_n_steps=1
    line = next(r.message for r in caplog.records if r.message.startswith("epoch 1/1"))
    assert "| read " in line and "ms/img" in line
    assert any("read limits it" in r.message for r in caplog.records)
    with open(run / "pipeline.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    assert [row["batch"] for row in rows] == ["0", "1", "2"]
    spans = pipeline_report.read_spans(run / "pipeline.csv")
    waits = [s.width for s in spans if s.stage == "wait"]
    assert waits == pytest.approx([float(r["arrived"]) - float(r["asked"]) for r in rows])
    reads = sum(s.width for s in spans if s.stage == "read")
    assert reads >= 3 * 16 * 0.01 * 0.9  # the reads' share of each batch's span, drawn
    png = pipeline_report.report(run)
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_the_report_names_a_run_without_timings_and_a_forged_row(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match=r"trainer\.pipeline_timing=true"):
        pipeline_report.report(tmp_path)
    (tmp_path / "pipeline.csv").write_text("epoch,batch,worker,asked,arrived\n1,0,0,x,2\n")
    with pytest.raises(ValueError, match=r"pipeline.csv line 2: column 'asked'"):
        pipeline_report.report(tmp_path)


def test_mode_benchmark_times_the_stages_of_its_window() -> None:
    """time_loader with stage times: each pipeline/<stage>_ms over the timed batches only."""
    loader = _loader(Slowed(read_s=SLOW_S))
    settings = BenchmarkSettings(batches=1, warmup=1, compute="none", repeats=2)
    times = PipelineTimes(torch.device("cpu"))
    metrics = time_loader(loader, settings, pipeline=times)
    assert set(PIPELINE_KEYS) <= set(metrics)
    assert metrics["pipeline/read_ms"] >= 1000 * SLOW_S
    assert metrics["pipeline/h2d_ms"] == 0  # compute=none: nothing is copied


def test_a_sweeps_picture_stacks_each_jobs_stages_from_its_row() -> None:
    from matplotlib.figure import Figure

    rows = [
        {"job": str(job), "overrides": f"loader.num_workers={job}"}
        | {key: str(job + i) for i, key in enumerate(PIPELINE_KEYS)}
        for job in (0, 2)
    ]
    figure = Figure()
    plot_stages(rows, figure)
    main, workers = figure.axes
    for ax, keys in ((main, PIPELINE_KEYS[4:]), (workers, PIPELINE_KEYS[:4])):
        widths = [round(bar.get_width(), 6) for bar in ax.patches]
        assert widths == [float(row[key]) for key in keys for row in rows]
