"""Sweeps: per-job summary rows that survive failures, benchmark metrics, hints, auto-tuning."""

from __future__ import annotations

import csv
import json
import logging
import subprocess
from pathlib import Path

import pytest
from hydra.utils import instantiate

from engine.data.autotune import measured_workers
from engine.data.samplers import SequentialOrder
from engine.metric_keys import METRICS_BY_MODE
from engine.modes.benchmark import benchmark
from engine.sweeps.plot import parse_overrides
from engine_dev.api import without_fold_keys
from src.loop import train
from src.step import TrainStep
from tests.cli import run_cli
from tests.train_process import FAULTY, allowing

ROOT = Path(__file__).resolve().parents[1]
SLOW = ["dataset=tensor", "dataset._target_=tests.slow_dataset.SlowTensorFile"]


def _sweep(demo_dir: Path, sweep_dir: Path, *args: str) -> subprocess.CompletedProcess:
    return run_cli(
        "-m",
        "mode=benchmark",
        "benchmark.batches=3",
        "benchmark.warmup=1",
        f"paths.demo_dir={demo_dir}",
        f"hydra.sweep.dir={sweep_dir}",
        *args,
        cwd=ROOT,
    )


def _rows(sweep_dir: Path) -> list[dict[str, str]]:
    with open(sweep_dir / "summary.csv", newline="") as f:
        return list(csv.DictReader(f))


def test_sweep_summary_has_one_row_per_job(demo_dir: Path, tmp_path: Path) -> None:
    result = _sweep(demo_dir, tmp_path, "loader.num_workers=0,1", "loader.batch_size=8,16")
    assert result.returncode == 0, result.stderr[-3000:]
    rows = _rows(tmp_path)
    assert sorted(int(r["job"]) for r in rows) == [0, 1, 2, 3]
    assert {r["status"] for r in rows} == {"ok"}
    assert all(float(r["loader/samples_per_s"]) > 0 for r in rows)
    assert (tmp_path / "summary.md").read_text().count("| ok |") == 4
    assert (tmp_path / "summary.png").stat().st_size > 0
    assert "Sweep summary (loader/samples_per_s)" in result.stderr + result.stdout
    (job3,) = tmp_path.glob("3_*")  # short, readable job dirs: 3_...batch_size=16,num_workers=1
    assert "batch_size=16,num_workers=1" in job3.name and (job3 / "metrics.json").exists()


def test_failed_job_is_recorded_and_others_kept(demo_dir: Path, tmp_path: Path) -> None:
    result = _sweep(demo_dir, tmp_path, "loader.batch_size=8,0")
    assert result.returncode != 0  # the sweep still fails
    rows = {parse_overrides(r["overrides"])["loader.batch_size"]: r for r in _rows(tmp_path)}
    assert rows["8"]["status"] == "ok"
    failed = rows["0"]
    assert (
        failed["status"] == "failed" and "loader.batch_size=0: expected int >= 1" in failed["error"]
    )
    assert "failed" in (tmp_path / "summary.md").read_text()

    # batch 8 was job 0 and is job 1 now: its earlier result is found by overrides, not number
    rerun = _sweep(demo_dir, tmp_path, "loader.batch_size=16,8", "summary.skip_completed=true")
    assert rerun.returncode == 0, rerun.stderr[-3000:]
    assert "job 1 already finished ok" in rerun.stderr + rerun.stdout
    statuses = [
        (parse_overrides(r["overrides"])["loader.batch_size"], r["status"]) for r in _rows(tmp_path)
    ]
    assert statuses == [("8", "ok"), ("0", "failed"), ("16", "ok")]


def test_benchmark_mode_writes_loader_metrics(make_cfg) -> None:
    cfg = make_cfg("mode=benchmark", "benchmark.batches=4", "benchmark.warmup=1")
    metrics = benchmark(cfg, step=TrainStep)
    assert set(metrics) == set(METRICS_BY_MODE["benchmark"])
    written = json.loads((Path(cfg.paths.output_dir) / "metrics.json").read_text())
    assert written == pytest.approx(metrics)
    assert metrics["loader/samples_per_s"] > 0 and metrics["loader/peak_rss_mb"] > 10
    # every timed batch is full (batch 16, drop_last): samples/s is 16 x batches/s exactly
    assert metrics["loader/samples_per_s"] == pytest.approx(16 * metrics["loader/batches_per_s"])
    assert metrics["loader/data_wait_frac"] > 0 and metrics["loader/cpu_ms_per_sample"] > 0


class CountedStep(TrainStep):
    """The template's step, counting the batches it trained on."""

    calls = 0

    def __call__(self, batch):
        CountedStep.calls += 1
        return super().__call__(batch)


def test_benchmark_with_model_steps(make_cfg) -> None:
    cfg = make_cfg(
        "mode=benchmark",
        "benchmark.batches=3",
        "benchmark.warmup=1",
        "benchmark.repeats=2",
        "benchmark.compute=model",
    )
    CountedStep.calls = 0
    benchmark(cfg, step=CountedStep)
    assert CountedStep.calls == 2 * (1 + 3)  # a train step on every batch, the warm-ups' too


def test_starved_loop_logs_a_hint(make_cfg, caplog) -> None:
    """0.3 s of sleep per batch fetch against a step of milliseconds: the wait is far above
    20%, and the fetch outside read and transform is the decode stage."""
    cfg = make_cfg(
        *SLOW,
        "+dataset.delay_s=0.3",
        "trainer.max_epochs=1",
        "trainer.limit_train_batches=4",
        "trainer.limit_val_batches=1",
        "trainer.pipeline_timing=true",  # a stand-in for a slow decoder: timed as one
    )
    with caplog.at_level(logging.WARNING, logger="engine.training.starvation"):
        train(cfg)
    assert "decode limits it" in caplog.text
    assert "loader.num_workers (now 0)" in caplog.text and "prefetch_factor" not in caplog.text


def _fed(monkeypatch, rates: dict[int, list[float]]) -> list[int]:
    """Make every measurement of `loader.num_workers=auto` return the next of `rates[n]` for
    n workers; the worker counts in the order they were measured."""
    order: list[int] = []

    def measured(dataset, settings, sampler) -> float:
        order.append(settings.num_workers)
        return rates[settings.num_workers][order.count(settings.num_workers) - 1]

    monkeypatch.setattr("engine.data.autotune.measure_samples_per_s", measured)
    return order


def test_auto_workers_choose_from_the_rates_measured_in_rotated_rounds(
    make_cfg, caplog, monkeypatch
) -> None:
    cfg = make_cfg("dataset=tensor", "loader.num_workers=auto")
    dataset = instantiate(without_fold_keys(cfg.dataset), split="train")
    settings = instantiate(cfg.loader)
    order = _fed(monkeypatch, {0: [273, 271, 288], 2: [403, 407, 402]})
    with caplog.at_level(logging.INFO, logger="engine.data.autotune"):
        assert measured_workers(dataset, settings, SequentialOrder, candidates=[0, 2]) == 2
    assert order == [0, 2, 2, 0, 0, 2]  # each round starts one candidate later
    assert "of 3 rounds {0: 273 [271-288], 2: 403 [402-407]}; chose 2" in caplog.text
    # one slow round of 2 workers overlaps 0's range: the repeats cannot tell them apart
    _fed(monkeypatch, {0: [273, 271, 288], 2: [403, 269, 407]})
    assert measured_workers(dataset, settings, SequentialOrder, candidates=[0, 2]) == 0


def test_auto_workers_measure_for_real(make_cfg) -> None:
    """The one check on the clock: the main process sleeps 0.1 s a batch, workers never, so 2
    workers deliver far more than 10x the samples/s of 0, on any load."""
    cfg = make_cfg(*SLOW, "+dataset.delay_s=0.1", "+dataset.only_in_main=true")
    dataset = instantiate(without_fold_keys(cfg.dataset), split="train")
    settings = instantiate(cfg.loader)
    assert measured_workers(dataset, settings, SequentialOrder, candidates=[0, 2]) == 2


def test_unknown_rank_metric_fails_before_any_work(demo_dir: Path, tmp_path: Path) -> None:
    result = run_cli(
        f"paths.demo_dir={demo_dir}",
        f"hydra.run.dir={tmp_path}",
        "summary.rank_by=val/accuracy",
        cwd=ROOT,
    )
    assert result.returncode != 0 and "summary.rank_by='val/accuracy' is not a metric" in (
        result.stderr
    )
    assert not (tmp_path / "metrics.json").exists()


FAILING_JOBS = {
    # 2-value mean/std on 3-channel images: every job fails inside the training loop
    "in the loop": ("transforms.mean=[0.5,0.5],[0.4,0.4]", "transforms.std=[0.25,0.25]"),
    # a worker dies: the loader's error names the file, chained to torch's own (whose
    # traceback holds the loader and its other worker too)
    "a dead worker": (
        f"dataset._target_={FAULTY}",
        "+dataset.fault=die",
        "+dataset.at_index=5",
        allowing(FAULTY),
        "loader.prefetch_factor=2,3",
    ),
}


@pytest.mark.parametrize("failing", list(FAILING_JOBS))
def test_failed_jobs_do_not_leave_loader_workers_behind(demo_dir, tmp_path, failing) -> None:
    result = _sweep(
        demo_dir,
        tmp_path,
        "mode=train",
        "loader.num_workers=2",
        *FAILING_JOBS[failing],
        "+hydra.callbacks.children._target_=tests.worker_probe.ChildCount",
    )
    assert result.returncode != 0
    assert (tmp_path / "children.txt").read_text().split() == ["0", "0"]
