"""A new user's first hour (issue 22): threads that fit the cores, progress in logs, the run dir
on screen and linked as latest, and every typo or failure said once, in one line, with the fix."""

from __future__ import annotations

import logging
import re
from pathlib import Path

import pytest
import torch
from torch import nn

from engine.core import cpus
from engine.core.progress import Cadence, LoggedBar, counted
from engine.data.datasets.imagefolder import FolderWalk
from engine.training.assemble import assemble
from engine.training.batches import DeviceBatch
from engine.training.device import resolve_precision
from engine.training.oversubscription import (
    SlowComputeHint,
    single_thread_step_s,
    slow_compute_hint,
)
from tests.cli import run_cli
from tests.conftest import NARROW_MODEL

FAST = ("debug=fast", NARROW_MODEL)


def _demo(demo_dir: Path, tmp_path: Path) -> list[str]:
    return [f"paths.demo_dir={demo_dir}", f"paths.log_dir={tmp_path / 'outputs'}", *FAST]


# ---- threads ---------------------------------------------------------------------------------


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
    assert cpus.available_cpus() == min(2, len(__import__("os").sched_getaffinity(0)))


def test_auto_threads_are_the_rank_s_cores_less_the_workers(monkeypatch) -> None:
    monkeypatch.setattr(cpus, "available_cpus", lambda: 16)
    assert cpus.main_threads(4) == 12
    assert cpus.main_threads(32) == 1  # at least one
    monkeypatch.setenv("TORCHELASTIC_RUN_ID", "x")
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "4")
    assert cpus.main_threads(2) == 2  # 16 cores / 4 ranks - 2 workers


def test_trainer_num_threads_sets_torch_s_threads(make_cfg) -> None:
    before = torch.get_num_threads()
    try:
        assemble(make_cfg("trainer.num_threads=1"))
        assert torch.get_num_threads() == 1
        assemble(make_cfg("loader.num_workers=0"))  # auto
        assert torch.get_num_threads() == cpus.main_threads(0)
    finally:
        torch.set_num_threads(before)


def test_the_header_line_states_the_threads(demo_dir: Path, tmp_path: Path) -> None:
    result = run_cli(*_demo(demo_dir, tmp_path), cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-2000:]
    assert re.search(r"\| threads \d+ \(auto: \d+ cores? - 0 workers\)", result.stdout)


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


def test_a_run_under_tee_logs_progress_lines(demo_dir: Path, tmp_path: Path) -> None:
    result = run_cli(*_demo(demo_dir, tmp_path), "trainer.log_every_n_seconds=1e-9", cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-2000:]
    assert re.search(r"epoch 1/1: \d+/\d+ batches \| \d+ samples/s \| ETA ", result.stdout)


def test_a_long_listing_says_how_far_it_got(tmp_path: Path, caplog) -> None:
    for name in ("a", "b"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "x.jpg").write_bytes(b"")
    with caplog.at_level(logging.INFO, logger="engine.data.datasets.imagefolder"):
        FolderWalk(tmp_path, report_every_s=0.0).images(str(tmp_path))
    assert re.search(r"listing .*: \d+ entries in \d+ folders so far", caplog.text)


# ---- the run dir on screen, latest, FAILED ---------------------------------------------------


def test_the_run_dir_is_the_first_and_last_line_and_latest_which_sweeps_leave_alone(
    demo_dir, tmp_path
) -> None:
    outputs = tmp_path / "outputs"
    result = run_cli(*_demo(demo_dir, tmp_path), cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-2000:]
    lines = [line for line in result.stdout.splitlines() if "][" in line]  # the log lines
    run = tmp_path / lines[0].split("run dir: ")[1]
    assert lines[0].endswith(f"run dir: {run.relative_to(tmp_path)}")
    assert lines[-1].endswith(f"run dir: {run.relative_to(tmp_path)}")
    assert (outputs / "latest").resolve() == (outputs / "latest_train").resolve() == run.resolve()
    assert not (outputs / "latest").readlink().is_absolute()  # a moved outputs/ keeps it

    # a sweep after it points latest_sweep at its sweep dir and leaves latest_train alone
    sweep = tmp_path / "sweep"
    swept = run_cli("-m", *_demo(demo_dir, tmp_path), "trainer.seed=1", f"hydra.sweep.dir={sweep}",
                    cwd=tmp_path)  # fmt: skip
    assert swept.returncode == 0, swept.stderr[-2000:]
    assert (outputs / "latest_sweep").resolve() == sweep.resolve()
    assert (outputs / "latest").resolve() == (outputs / "latest_train").resolve() == run.resolve()

    evaluated = run_cli(*_demo(demo_dir, tmp_path), "mode=eval", "eval.checkpoint=latest",
                        cwd=tmp_path)  # fmt: skip
    assert evaluated.returncode == 0, evaluated.stderr[-2000:]
    line = (
        r"eval.checkpoint=latest: (\S+) \(the newest training outside sweeps; saved [-\d: ]+ "
        r"at step \d+, 1 epoch finished, best val/acc [\d.]+\), its best.pt"
    )
    said = re.search(line, evaluated.stdout)
    assert said and (tmp_path / said[1]).resolve() == run.resolve(), evaluated.stdout[-2000:]
    assert (outputs / "latest_eval" / "metrics.json").is_file()
    assert (outputs / "latest_train").resolve() == run.resolve()  # still the training


def test_latest_before_any_training_is_one_line(demo_dir, tmp_path) -> None:
    result = run_cli(*_demo(demo_dir, tmp_path), "mode=predict", "predict.checkpoint=latest",
                     f"predict.input={demo_dir}", cwd=tmp_path)  # fmt: skip
    assert result.returncode == 1
    assert (
        "predict.checkpoint=latest: " in result.stderr and "latest_train does not" in result.stderr
    )


def test_a_failed_run_is_marked_and_its_rerun_unmarked(demo_dir, tmp_path) -> None:
    run = tmp_path / "run"
    failed = run_cli(*_demo(demo_dir, tmp_path), "optimizer.lr=fast", f"hydra.run.dir={run}",
                     cwd=tmp_path)  # fmt: skip
    assert failed.returncode == 1
    assert (run / "FAILED").read_text().startswith("ConfigError: optimizer.lr='fast'")
    assert "(FAILED; the traceback is in its train.log)" in failed.stdout.splitlines()[-1]
    again = run_cli(*_demo(demo_dir, tmp_path), f"hydra.run.dir={run}", cwd=tmp_path)
    assert again.returncode == 0, again.stderr[-2000:]
    assert not (run / "FAILED").exists()
    outputs = tmp_path / "outputs"
    later = run_cli(*_demo(demo_dir, tmp_path), "dataset.root=nowhere", cwd=tmp_path)
    assert later.returncode == 1  # a failed training after the good one:
    assert (outputs / "latest_train").resolve() == run.resolve()  # eval.checkpoint=latest: it
    assert (outputs / "latest").resolve() != run.resolve()  # latest: the failed one, to read


# ---- typos and failures: one line ------------------------------------------------------------


@pytest.mark.parametrize(
    ("typo", "said"),
    [
        ("loader.num_worker=4", "(did you mean loader.num_workers?)"),
        ("trainer.max_epoch=3", "(did you mean trainer.max_epochs?)"),
        ("dataset=imgfolder", "(did you mean dataset=imagefolder?)"),
        ("loadr.batch_size=8", "(did you mean loader?)"),
        ("+sweep=loadr", "(did you mean +sweep=loader?)"),
        ("logger=tensorbord", "(did you mean logger=tensorboard?)"),  # an engine group's option
        ("hydra.searchpath=[file:///tmp]", "keep them first: hydra.searchpath=[pkg://engine.conf,"),
    ],
)
def test_a_typo_is_one_line_with_the_fix(tmp_path: Path, typo: str, said: str) -> None:
    result = run_cli(typo, f"paths.log_dir={tmp_path / 'outputs'}", cwd=tmp_path)
    assert result.returncode == 1
    assert result.stderr.strip().splitlines() == [result.stderr.strip()]  # one line
    assert result.stderr.startswith(f"{typo}: ") and said in result.stderr
    assert "To append to your config" not in result.stderr
    assert not (tmp_path / "outputs").exists()  # stopped before any run dir


def test_a_mistyped_mode_is_one_line_and_makes_no_latest_link(tmp_path: Path) -> None:
    result = run_cli("mode=trian", f"paths.log_dir={tmp_path / 'outputs'}", cwd=tmp_path)
    assert result.returncode == 1 and "(did you mean mode=train?)" in result.stderr
    assert not list((tmp_path / "outputs").glob("latest*"))


def test_a_root_one_level_too_deep_names_the_right_one(demo_dir, tmp_path) -> None:
    root = demo_dir / "imagefolder"
    result = run_cli(*_demo(demo_dir, tmp_path), f"dataset.root={root / 'train'}", cwd=tmp_path)
    assert result.returncode == 1
    assert f"did you mean dataset.root={root}? it holds train/ and val/" in result.stderr


def test_a_runtime_data_error_is_printed_once_in_one_line(demo_dir, tmp_path) -> None:
    listing = tmp_path / "train.csv"
    listing.write_text("path,label\nimagefolder/train/circle/missing.png,circle\n")
    args = [*_demo(demo_dir, tmp_path), "dataset=csv", f"dataset.train_csv={listing}",
            f"dataset.root={demo_dir}", f"hydra.run.dir={tmp_path / 'run'}"]  # fmt: skip
    result = run_cli(*args, cwd=tmp_path)
    assert result.returncode == 1
    assert result.stderr.count("missing.png") == 1 and "Traceback" not in result.stderr
    assert "Traceback" in (tmp_path / "run" / "train.log").read_text()
    full = run_cli(*args[:-1], f"hydra.run.dir={tmp_path / 'run2'}", cwd=tmp_path,
                   env={"HYDRA_FULL_ERROR": "1"})  # fmt: skip
    assert full.returncode == 1 and "Traceback" in full.stderr


def test_progress_and_threads_keys_do_not_change_what_resume_matches(make_cfg) -> None:
    from omegaconf import OmegaConf

    from engine.runs.resume import config_key

    def key(*overrides: str) -> str:
        return config_key(OmegaConf.to_container(make_cfg(*overrides), resolve=True))

    assert key() == key("trainer.log_every_n_seconds=2", "trainer.num_threads=1")
    assert key() != key("trainer.max_epochs=3")  # what does change the run still does


def test_a_sweep_job_with_a_mistyped_mode_gets_its_failed_row(demo_dir, tmp_path) -> None:
    sweep = tmp_path / "sweep"
    args = ["-m", *_demo(demo_dir, tmp_path), "mode=trian,train", f"hydra.sweep.dir={sweep}"]
    result = run_cli(*args, cwd=tmp_path)
    assert result.returncode == 1 and "Traceback" not in result.stderr
    rows = (sweep / "summary.csv").read_text().splitlines()
    assert len(rows) == 3 and "failed" in rows[1] and "ok" in rows[2]
