"""Per-stage pipeline timings (trainer.pipeline_timing): each batch's worker stages travel with
it, the main process adds wait, h2d and step, and a pipeline built slow at one stage (a sleep
in read, a slow decode, a heavy transform, a huge collate, a slow copy) gets the hint naming
that stage and its fix. End to end on the reference project: TensorBoard's points, the
metrics, pipeline.csv, the epoch line and the report's PNG drawn from the run's own rows."""

from __future__ import annotations

import csv
import logging
import signal
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from PIL import Image
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
from torch.utils.data import default_collate
from torchvision.transforms import v2

from engine.data.datasets.base import MapDataset
from engine.data.datasets.image_files import LabelledImageFiles
from engine.data.decode_policy import DecodePolicy
from engine.data.loaders import make_loader
from engine.data.seeded import seeded
from engine.data.transforms import TimedCompose
from engine.measure.stages import SUMS, StageTimes, split_times, timed_stage
from engine.metric_keys import PIPELINE_KEYS
from engine.modes import pipeline_report
from engine.modes.benchmark import BenchmarkSettings, time_loader
from engine.sweeps.plot import plot_stages
from engine.training.limiting_stage import limiting_stage
from engine.training.pipeline_timing import PipelineTimes
from engine.training.starvation import limit_hint
from engine_dev.small_sets import loader_settings
from reference.loop import train
from reference.step import EmaStep

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
    settings = loader_settings(4, workers, collate_fn=collate)
    return make_loader(seeded(dataset, 0), settings, None, False, time_stages=True)


def _run_pass(loader, move: Callable[[Any], Any] = lambda batch: batch) -> PipelineTimes:
    """One pass as the training loop makes it: arrivals, the copy, a quick step."""
    times = PipelineTimes(torch.device("cpu"))
    for _ in times.stepping(map(times.mover(move), times.arrivals(iter(loader))), 0):
        pass
    return times


@pytest.fixture
def main_process_timed(monkeypatch: pytest.MonkeyPatch) -> None:
    """This process times its stages, as a training's pass does with loader.num_workers=0."""
    monkeypatch.setattr(SUMS, "enabled", True)


@pytest.mark.parametrize("workers", [0, 2])
def test_each_batch_carries_its_stage_times_from_its_worker(
    workers: int, main_process_timed: None
) -> None:
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
    times = _run_pass(loader, move or (lambda batch: batch))
    limit = limiting_stage(times.epoch(), loader, False, times.uint8)
    assert limit is not None and limit.stage == stage
    hint = limit_hint(limit, 0.9, 0.2)
    assert f"and {stage} limits it" in hint and fix in hint


def test_a_stage_marked_inside_itself_or_inside_a_fetch_counts_once(
    main_process_timed: None,
) -> None:
    """A marked reader calling another marked reader, and a decode marked inside a fetch:
    each sleep is counted once, where it belongs."""

    @timed_stage("read")
    def outer() -> bytes:
        return _slow_read(SLOW_S)  # itself marked as read

    @timed_stage("decode")
    def decode() -> None:
        time.sleep(SLOW_S)

    class Marked(Slowed):
        def __getitem__(self, index: int) -> tuple[torch.Tensor, int]:
            outer()
            decode()
            return torch.zeros(3, 8, 8, dtype=torch.uint8), 0

    for batch in _loader(Marked()):
        seconds = split_times(batch)[1].seconds
        assert 4 * SLOW_S <= seconds["read"] < 4 * 1.5 * SLOW_S
        assert 4 * SLOW_S <= seconds["decode"] < 4 * 1.5 * SLOW_S


def test_only_the_samples_stages_can_be_marked() -> None:
    with pytest.raises(ValueError, match=r"timed_stage\('collate'\): a sample's code marks"):
        timed_stage("collate")


def test_a_wait_the_timed_stages_cannot_explain_is_said_as_such() -> None:
    """Two workers starting up for two tiny batches: the wait is their start-up, which no
    stage times; the hint says so instead of blaming the fastest stage."""
    loader = _loader(Slowed(), workers=2)
    times = _run_pass(loader)
    limit = limiting_stage(times.epoch(), loader, False, times.uint8)
    assert limit is not None and limit.stage == "untimed"
    assert "persistent_workers=true" in limit_hint(limit, 0.9, 0.2)


def _jpeg_files(root: Path, count: int, size: tuple[int, int]) -> LabelledImageFiles:
    """`count` noisy JPEGs of `size` (width, height), decoded in the main process (main)."""
    rng = np.random.default_rng(0)
    paths = []
    for i in range(count):
        pixels = rng.integers(0, 255, (size[1], size[0], 3), np.uint8)
        Image.fromarray(pixels).save(root / f"{i}.jpg", quality=90)
        paths.append(str(root / f"{i}.jpg"))
    crop = v2.RandomResizedCrop(16, antialias=True)
    return LabelledImageFiles(
        paths,
        [0] * count,
        ["a"],
        transform=TimedCompose([crop]),
        decode=DecodePolicy(device="main"),
    )


def test_a_decode_in_the_main_process_is_no_workers_stage(
    tmp_path: Path, main_process_timed: None
) -> None:
    """dataset.decode.device=main with no workers: the crops the main process resamples
    from the sent bytes count in its wait, never in the next batch's stages."""
    for batch in _loader(_jpeg_files(tmp_path, 8, (24, 16))):
        times = split_times(batch)[1]
        assert times.seconds["transform"] == 0 and not times.steps


def test_the_hint_names_the_batched_decode_when_it_fills_the_wait(
    tmp_path: Path, main_process_timed: None
) -> None:
    """A batch of photo-sized JPEGs decoded and cropped in the main process: the wait is that
    work, and the hint says so with its own fix (the workers' decode), not 'untimed'."""
    loader = _loader(_jpeg_files(tmp_path, 8, (640, 480)))
    times = _run_pass(loader)
    limit = limiting_stage(times.epoch(), loader, False, times.uint8)
    assert limit is not None and limit.stage == "batched decode", limit
    assert limit.line.startswith("the batched decode ") and " ms and crops " in limit.line
    assert any("dataset.decode.device=cpu" in fix for fix in limit.fixes)


def test_a_training_logs_its_stages_and_draws_them(
    reference_cfg, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog
) -> None:
    """A training whose reads are slow, stopped mid-epoch 2 and resumed: pipeline/<stage>_ms
    at every logged step and in its metrics, one pipeline.csv row per batch (the stopped
    run's kept once), the epoch line and the hint naming read, and the report's picture
    drawn from those rows."""
    import engine.data.decode as decode

    real = decode.read_regular_file.__wrapped__

    @timed_stage("read")
    def slow(path: Any, max_bytes: int | None) -> bytes:
        time.sleep(0.01)
        return real(path, max_bytes)

    monkeypatch.setattr(decode, "read_regular_file", slow)
    knobs = ("trainer.max_epochs=2", "trainer.limit_train_batches=3", "logger=tensorboard")
    original = EmaStep.optimizer_step

    def stopping(step: EmaStep) -> None:  # SIGTERM after optimizer step 4, in epoch 2
        original(step)
        if step.steps == 4:
            signal.raise_signal(signal.SIGTERM)

    monkeypatch.setattr(EmaStep, "optimizer_step", stopping)
    with pytest.raises(SystemExit), caplog.at_level(logging.INFO):
        train(reference_cfg("timed", *knobs))
    monkeypatch.setattr(EmaStep, "optimizer_step", original)
    with caplog.at_level(logging.INFO):
        metrics = train(reference_cfg("timed", *knobs, "trainer.resume=auto"))
    run = tmp_path / "timed"
    assert set(PIPELINE_KEYS) <= set(metrics) and metrics["pipeline/read_ms"] >= 10
    board = EventAccumulator(str(run / "tensorboard")).Reload()
    # on the board under ~pipeline/: a group after train/ and val/ (engine/runs/tensorboard.py)
    assert [e.step for e in board.Scalars("~pipeline/read_ms")] == [1, 2, 3, 4, 5, 6]
    for epoch in ("epoch 1/2", "epoch 2/2"):
        line = next(r.message for r in caplog.records if r.message.startswith(epoch))
        assert "| read " in line and "ms/img" in line
    assert any("read limits it" in r.message for r in caplog.records)
    with open(run / "pipeline.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    assert [(r["epoch"], r["step"], r["batch"]) for r in rows] == [
        ("1", "1", "0"), ("1", "2", "1"), ("1", "3", "2"),
        ("2", "4", "0"), ("2", "5", "1"), ("2", "6", "2"),
    ]  # fmt: skip
    spans = pipeline_report.read_spans(run / "pipeline.csv")
    waits = [s.width for s in spans if s.stage == "wait"]
    assert waits == pytest.approx([float(r["arrived"]) - float(r["asked"]) for r in rows])
    reads = sum(s.width for s in spans if s.stage == "read")
    assert reads >= 6 * 16 * 0.01 * 0.9  # the reads' share of each batch's span, drawn
    png = pipeline_report.report(run)
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_the_report_names_a_run_without_timings_and_a_forged_row(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match=r"trainer\.pipeline_timing=true"):
        pipeline_report.report(tmp_path)
    header = "epoch,step,batch,worker,asked,arrived,h2d_ms,step_from,step_to\n"
    now = time.time()
    moments = f"{now - 3:.6f},{now - 2:.6f},0,{now - 2:.6f},{now - 1:.6f}"
    forged = {
        moments.replace(f"{now - 3:.6f}", "x", 1): r"line 2: its asked is 'x', not a finite number",
        moments.replace(f"{now - 2:.6f}", "inf", 1): r"line 2: its arrived is inf, not a finite",
        moments.replace(f"{now - 2:.6f}", "nan", 1): r"line 2: its arrived is nan",
        moments + "9" * 200_000: r"line 2: not CSV \(field larger than field limit",
        moments.replace("0", "\xff", 1): r"byte \d+ is not UTF-8",
        # a row dated 1970 once stretched the picture over 56 years
        f"{moments}\n1,1,0,0,{moments}\n1,1,0,0,5," + moments.partition(",")[2]: (
            r"line 4: its asked is 5.0 \(1970-01-01 00:00:05 UTC\), more than a year from the "
            r"file's other rows"
        ),
        # the epoch itself: 0.0 once passed as no moment at all
        f"{moments}\n1,1,0,0,{moments}\n1,1,0,0,0," + moments.partition(",")[2]: (
            r"line 4: its asked is 0.0 \(1970-01-01 00:00:00 UTC\), more than a year from the "
            r"file's other rows"
        ),
        moments.replace(
            f"{now - 1:.6f}", f"{now - 9:.6f}"
        ): r"its step_to .* is before its step_from",
    }
    for row, message in forged.items():
        (tmp_path / "pipeline.csv").write_bytes(
            (header + "1,1,0,0," + row + "\n").encode("latin-1")
        )
        with pytest.raises(ValueError, match=message):
            pipeline_report.report(tmp_path)
    lanes = header.replace(",asked", ",built_from,built_to,read_ms,decode_ms,transform_ms,"
                           "collate_ms,asked")  # fmt: skip
    built = f"{now - 4:.6f},{now - 3:.6f},1,1,1,1"
    (tmp_path / "pipeline.csv").write_text(lanes + f"1,1,0,3000,{built},{moments}\n")
    with pytest.raises(ValueError, match=r"its worker is 3000, not an int >= -1 and <= 255"):
        pipeline_report.report(tmp_path)
    (tmp_path / "pipeline.csv").write_text(
        lanes + f"1,1,0,3,{f'{now - 4:.6f},'},1,1,1,1,{moments}\n"
    )
    with pytest.raises(ValueError, match=r"line 2: it has one of built_from and built_to"):
        pipeline_report.report(tmp_path)  # once a raw TypeError
    (tmp_path / "pipeline.csv").write_text(lanes + f"1,1,0,3,{built},{moments}\n")
    assert pipeline_report.report(tmp_path).is_file()  # the same row with a real worker


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


def test_a_sweeps_picture_names_each_job_by_its_setting_whatever_the_prefix() -> None:
    """`++loader.num_workers=0,2` sets loader.num_workers: the bars are labelled with it."""
    from matplotlib.figure import Figure

    rows = [
        {"job": str(job), "overrides": f"++loader.num_workers={job} +trainer.seed=1"}
        | {key: "1" for key in PIPELINE_KEYS}
        for job in (0, 2)
    ]
    figure = Figure()
    plot_stages(rows, figure)
    figure.canvas.draw()
    main, _ = figure.axes
    assert [t.get_text() for t in main.get_yticklabels()] == [
        "#0 num_workers=0",
        "#2 num_workers=2",
    ]
