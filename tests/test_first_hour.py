"""A new user's first hour (issue 22), as the project runs: threads that fit the cores, progress
in logs, the run dir on screen and linked as latest, and every typo or failure said once, in
one line, with the fix. The parts on their own (core counts under cgroups, the slow-compute
hint, progress lines off a terminal, a long listing): the engine's
tests/test_threads_and_progress.py."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import torch

from engine.api import assemble
from engine.core import cpus
from tests.cli import run_cli
from tests.conftest import NARROW_MODEL

FAST = ("debug=fast", NARROW_MODEL)


def _demo(demo_dir: Path, tmp_path: Path) -> list[str]:
    return [f"paths.demo_dir={demo_dir}", f"paths.log_dir={tmp_path / 'outputs'}", *FAST]


# ---- threads ---------------------------------------------------------------------------------


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


def test_a_run_under_tee_logs_progress_lines(demo_dir: Path, tmp_path: Path) -> None:
    result = run_cli(*_demo(demo_dir, tmp_path), "trainer.log_every_n_seconds=1e-9", cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-2000:]
    assert re.search(r"epoch 1/1: \d+/\d+ batches \| \d+ samples/s \| ETA ", result.stdout)


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
