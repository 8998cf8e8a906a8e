"""Threads and progress on their own: cgroup quotas cap the usable cores and the auto thread
count is the rank's cores less its workers; compute far slower than a single-thread step is
said once (the measuring step leaves the model as it was); off a terminal, progress is a log
line every N seconds, across short epochs too, counted in images where a writer counts them;
a long folder listing says how far it got."""

from __future__ import annotations

import logging
import os
import re
from pathlib import Path

import torch
from torch import nn

from engine.core import cpus
from engine.core.progress import Cadence, LoggedBar, counted
from engine.data.datasets.imagefolder import FolderWalk
from engine.training.batches import DeviceBatch
from engine.training.device import resolve_precision
from engine.training.oversubscription import (
    SlowComputeHint,
    single_thread_step_s,
    slow_compute_hint,
)


def test_cgroup_quotas_cap_the_usable_cores(tmp_path: Path, monkeypatch) -> None:
    v2 = tmp_path / "v2"
    v2.mkdir()
    (v2 / "cpu.max").write_text("150000 100000\n")
    assert cpus.cgroup_cpu_limit(v2) == 1.5
    (v2 / "cpu.max").write_text("max 100000\n")
    assert cpus.cgroup_cpu_limit(v2) is None
    v1 = tmp_path / "v1" / "cpu"
    v1.mkdir(parents=True)
    (v1 / "cpu.cfs_quota_us").write_text("300000\n")
    (v1 / "cpu.cfs_period_us").write_text("100000\n")
    assert cpus.cgroup_cpu_limit(tmp_path / "v1") == 3.0
    assert cpus.cgroup_cpu_limit(tmp_path / "none") is None
    monkeypatch.setattr(cpus, "cgroup_cpu_limit", lambda: 1.5)
    assert cpus.available_cpus() == min(2, len(os.sched_getaffinity(0)))


def test_auto_threads_are_the_rank_s_cores_less_the_workers(monkeypatch) -> None:
    monkeypatch.setattr(cpus, "available_cpus", lambda: 16)
    assert cpus.main_threads(4) == 12
    assert cpus.main_threads(32) == 1  # at least one
    monkeypatch.setenv("TORCHELASTIC_RUN_ID", "x")
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "4")
    assert cpus.main_threads(2) == 2  # 16 cores / 4 ranks - 2 workers


# ---- compute far slower than a single-thread step --------------------------------------------


def test_slow_compute_is_said_only_when_far_slower() -> None:
    assert slow_compute_hint(0.0019, 0.001, 2, 1) is None
    hint = slow_compute_hint(0.004, 0.001, 2, 1)
    assert hint is not None and "4.0x a single-thread step" in hint
    assert "trainer.num_threads" in hint and "loader.num_workers" in hint


def _batch() -> tuple[nn.Module, DeviceBatch]:
    model = nn.Sequential(nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4), nn.Flatten(), nn.LazyLinear(2))
    inputs, labels = torch.randn(8, 3, 8, 8), torch.randint(0, 2, (8,))
    model(inputs)  # materialise the lazy layer
    return model, DeviceBatch(inputs, labels, ())


def test_the_single_thread_step_leaves_the_model_as_it_was() -> None:
    model, batch = _batch()
    model.train()
    before = {k: v.clone() for k, v in model.state_dict().items()}
    seconds = single_thread_step_s(
        model, nn.CrossEntropyLoss(), batch, resolve_precision("32", torch.device("cpu"))
    )
    assert seconds > 0
    after = model.state_dict()
    assert all(torch.equal(before[k], after[k]) for k in before)  # BatchNorm's stats too
    assert all(p.grad is None for p in model.parameters())


def test_a_slow_epoch_on_the_cpu_is_warned_about_once(caplog) -> None:
    model, batch = _batch()
    hint = SlowComputeHint(torch.device("cpu"), workers=1)
    hint.keep(batch)
    precision = resolve_precision("32", torch.device("cpu"))
    slow = {"train/samples": 800, "train/epoch_s": 1e4, "train/data_wait_frac": 0.0}
    with caplog.at_level(logging.WARNING, logger="engine.training.oversubscription"):
        hint.check(1, slow, model, nn.CrossEntropyLoss(), precision)  # epoch 1: not judged
        assert not caplog.records
        hint.check(2, slow, model, nn.CrossEntropyLoss(), precision)
        hint.check(3, slow, model, nn.CrossEntropyLoss(), precision)
    assert len(caplog.records) == 1 and "oversubscribed" in caplog.text


# ---- progress off a terminal -----------------------------------------------------------------


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_off_a_terminal_progress_is_a_log_line_every_n_seconds(caplog) -> None:
    clock = Clock()
    bar = LoggedBar(120, "epoch 2/12", every=30, clock=clock, terminal=False)
    with caplog.at_level(logging.INFO, logger="engine.core.progress"):
        for _ in range(40):
            clock.now += 1.0
            bar.update(1, samples=32)
            bar.postfix(loss=1.23456)
    bar.close()
    lines = [r.getMessage() for r in caplog.records]
    # one line in 40 s, at 30 s: 30 batches of 32 samples, 90 batches to go at 1 per second
    assert lines == ["epoch 2/12: 30/120 batches | 32 samples/s | ETA 0:01:30 | loss 1.2346"]
    on_terminal = LoggedBar(120, "x", every=0.0, clock=clock, terminal=True)
    on_terminal.update(1)
    on_terminal.close()
    assert len(caplog.records) == 1  # a terminal has its bar, no lines


def test_epochs_shorter_than_the_interval_still_get_lines(caplog) -> None:
    clock = Clock()
    cadence = Cadence(30, clock)
    with caplog.at_level(logging.INFO, logger="engine.core.progress"):
        for epoch in (1, 2, 3):  # 25 s epochs, a line every 30 s across them
            bar = LoggedBar(25, f"epoch {epoch}/3", cadence, clock=clock, terminal=False)
            for _ in range(25):
                clock.now += 1.0
                bar.update(1)
            bar.close()
    assert [r.getMessage().split(":")[0] for r in caplog.records] == ["epoch 2/3", "epoch 3/3"]


def test_counted_shows_images_not_batches(caplog) -> None:
    with caplog.at_level(logging.INFO, logger="engine.core.progress"):
        batches = list(counted(iter([[0] * 64] * 3), 150, "cache train", 64, every_s=1e-9))
    assert len(batches) == 3
    assert "cache train: 150/150 images" in caplog.records[-1].getMessage()


def test_a_long_listing_says_how_far_it_got(tmp_path: Path, caplog) -> None:
    for name in ("a", "b"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "x.jpg").write_bytes(b"")
    with caplog.at_level(logging.INFO, logger="engine.data.datasets.imagefolder"):
        FolderWalk(tmp_path, report_every_s=0.0).images(str(tmp_path))
    assert re.search(r"listing .*: \d+ entries in \d+ folders so far", caplog.text)
