"""A run writes only into a folder of its own (engine/core/folder_mark.py): a fixed
hydra.run.dir that no run has marked (no .run.lock) and that holds anything (a user's
metrics.json, a dataset root, a checkout), or that another mode marked, is refused in one line
before anything is written; following its advice lets the run go on. Every entry a run
leaves at the top of its dir is a name that rule protects (engine.runs.run_lock.RUN_FILES).
A sweep dir alike, by its .sweep.lock (what a multirun leaves there: test_sweep_reports.py)."""

from __future__ import annotations

import fcntl
import json
import os
import shutil
from pathlib import Path

import pytest
from omegaconf import OmegaConf

from engine.runs.run_lock import (
    LOCK_NAME,
    RUN_FILES,
    SWEEP_LOCK_NAME,
    MultirunDirs,
    RunDirInUse,
    claim,
)
from engine_dev.cli import run_script
from engine_dev.fixtures import tree_fingerprint
from tests.conftest import TRAIN, reference_args

TINY = ("trainer.max_epochs=1", "loader.num_workers=0")


def _not_ours(key: str, folder: Path, shown: str, run: str = "run", mode: str = "mode=train"):
    lock = LOCK_NAME if run == "run" else SWEEP_LOCK_NAME
    return (
        f"{key}: {folder} already holds {shown}, and no {lock} (the mark {mode} leaves in a "
        f"folder of its own): it is someone else's, and {mode} writes only into a new or empty "
        f"folder, or one it marked; give this {run} another {key}, or move those entries out "
        f"(a {run}'s folder whose {lock} was deleted: touch {folder / lock})."
    )


@pytest.mark.parametrize("logging", [(), ("hydra/job_logging=disabled",)])  # no log file
def test_a_folder_of_the_users_files_is_refused_then_trains_when_emptied(
    demo_dir, tmp_path, logging
):
    mine = tmp_path / "results"
    (mine / ".hydra").mkdir(parents=True)
    (mine / ".hydra" / "config.yaml").write_text("my: own experiment's config\n")
    (mine / "metrics.json").write_text('{"mine": 1}\n')
    (mine / "predictions.csv").write_text("path,label\nx.jpg,cat\n")
    (mine / "history.csv").symlink_to(tmp_path / "elsewhere.csv")  # a link to nothing
    (mine / "README.md").write_text("a file no run writes\n")
    before = tree_fingerprint(mine)
    args = reference_args(demo_dir, tmp_path, *TINY, f"hydra.run.dir={mine}", *logging)
    refused = run_script(TRAIN, *args, cwd=tmp_path)
    assert refused.returncode == 1
    shown = ".hydra, README.md, history.csv, metrics.json and 1 more"
    assert refused.stderr.strip().splitlines() == [_not_ours("hydra.run.dir", mine, shown)]
    assert tree_fingerprint(mine) == before  # not even a log file
    for entry in mine.iterdir():
        entry.rename(tmp_path / entry.name)
    trained = run_script(TRAIN, *args, cwd=tmp_path)
    assert trained.returncode == 0, trained.stderr[-3000:]
    assert (tmp_path / "README.md").read_text() == "a file no run writes\n"


@pytest.mark.parametrize("where", ["a dataset root", "a checkout"])
def test_a_folder_of_someone_elses_entries_is_refused_before_hydra_writes_there(
    demo_dir, tmp_path, where
):
    """A run dir that is a folder of class folders, or `hydra.run.dir=.` in a checkout: no
    .hydra/, no FAILED, no log written among their entries (issue 48 item 11)."""
    if where == "a dataset root":
        folder = tmp_path / "images"
        for name in ("cat", "dog"):
            (folder / name).mkdir(parents=True)
            (folder / name / "0.jpg").write_bytes(b"jpeg")
        shown = "cat, dog"
    else:
        folder = tmp_path / "checkout"
        folder.mkdir()
        for name in ("train.py", "conf", "Makefile", "README.md", "src"):
            (folder / name).touch()
        shown = "Makefile, README.md, conf, src and 1 more"
    before = tree_fingerprint(folder)
    args = reference_args(demo_dir, tmp_path, *TINY, f"hydra.run.dir={folder}")
    refused = run_script(TRAIN, *args, cwd=tmp_path)
    assert refused.returncode == 1
    assert refused.stderr.strip().splitlines() == [_not_ours("hydra.run.dir", folder, shown)]
    assert tree_fingerprint(folder) == before


def test_mode_eval_never_writes_into_a_trainings_folder(demo_dir, tmp_path):
    """mode=eval with hydra.run.dir set to a training's dir is refused by the dir's mark (it
    wrote over the training's metrics.json, config_resolved.yaml and .hydra/: issue 48 item
    11); the training itself goes on there (a requeue)."""
    run = tmp_path / "run"
    args = reference_args(demo_dir, tmp_path, *TINY, f"hydra.run.dir={run}")
    assert run_script(TRAIN, *args, cwd=tmp_path).returncode == 0
    before = tree_fingerprint(run)
    evaluated = run_script(
        TRAIN, *args, "mode=eval", f"eval.checkpoint={run / 'checkpoints' / 'last.pt'}",
        cwd=tmp_path,
    )  # fmt: skip
    assert evaluated.returncode == 1
    assert evaluated.stderr.strip().splitlines() == [
        f"hydra.run.dir: {run} is the folder of mode=train (its {LOCK_NAME} says so), and "
        "mode=eval would write over that one's files; give this run another hydra.run.dir."
    ]
    assert tree_fingerprint(run) == before
    again = run_script(TRAIN, *args, "trainer.resume=auto", cwd=tmp_path)
    assert again.returncode == 0, again.stderr[-3000:]
    sweep = tmp_path / "sweep"  # a multirun's eval job given an old training's dir, no log file
    shutil.copytree(run, sweep / "0")
    (sweep / "0" / LOCK_NAME).write_text('{"pid": 1, "sweep": null, "job": null}')
    (sweep / SWEEP_LOCK_NAME).touch()
    before = tree_fingerprint(sweep / "0")
    multirun = run_script(
        TRAIN, "-m", *reference_args(demo_dir, tmp_path, *TINY), "mode=eval",
        f"eval.checkpoint={run}", f"hydra.sweep.dir={sweep}", "hydra.sweep.subdir=${hydra.job.num}",
        "hydra/job_logging=disabled",
        cwd=tmp_path,
    )  # fmt: skip
    assert multirun.returncode == 1 and "is the folder of mode=train" in multirun.stderr
    assert tree_fingerprint(sweep / "0") == before  # its .hydra/config.yaml too


def test_the_lock_file_the_message_asks_for_lets_a_runs_folder_go_on(demo_dir, tmp_path):
    run = tmp_path / "run"
    args = reference_args(demo_dir, tmp_path, *TINY, f"hydra.run.dir={run}")
    assert run_script(TRAIN, *args, cwd=tmp_path).returncode == 0
    (run / LOCK_NAME).unlink()  # a clean-up script that removed dot files
    assert run_script(TRAIN, *args, cwd=tmp_path).returncode == 1
    (run / LOCK_NAME).touch()
    resumed = run_script(TRAIN, *args, "trainer.resume=auto", cwd=tmp_path)
    assert resumed.returncode == 0, resumed.stderr[-3000:]


def test_every_entry_a_run_writes_at_the_top_of_its_dir_is_protected(demo_dir, tmp_path):
    trained = run_script(TRAIN, *reference_args(demo_dir, tmp_path, *TINY), cwd=tmp_path)
    assert trained.returncode == 0, trained.stderr[-3000:]
    evaluated = run_script(
        TRAIN, *reference_args(demo_dir, tmp_path, "mode=eval", "eval.checkpoint=latest"),
        cwd=tmp_path,
    )  # fmt: skip
    assert evaluated.returncode == 0, evaluated.stderr[-3000:]
    runs = list(tmp_path.glob("runs/*/*"))
    assert len(runs) == 2
    written = {p.name for run in runs for p in run.iterdir()}
    assert {"checkpoints", "metrics.json", "config_resolved.yaml"} <= written
    assert written - RUN_FILES == {LOCK_NAME, "train.log"}  # the log: appended, never replaced


def _run(run_dir: Path) -> object:
    return OmegaConf.create({"hydra": {"run": {"dir": str(run_dir)}, "job": {"name": "train"}}})


def test_a_writers_folder_given_as_run_dir_is_refused_naming_that_writer(tmp_path):
    """hydra.run.dir=data/shards: the folder is mode=shards', and the fix is another folder,
    not a .run.lock beside that writer's mark."""
    shards = tmp_path / "shards"
    shards.mkdir()
    (shards / ".shards.lock").write_text('{"writer": "mode=shards", "files": ["shards.json"]}')
    (shards / "shards.json").write_text("{}")
    with pytest.raises(SystemExit) as stopped:
        MultirunDirs().on_run_start(_run(shards))
    assert str(stopped.value) == (
        f"hydra.run.dir: {shards} is the folder of mode=shards (its .shards.lock says so), and "
        "a run of mode=train writes only into a folder of its own (a new folder inside it is "
        "one); give this run another hydra.run.dir."
    )


@pytest.mark.parametrize("kind", ["a folder", "a link to nothing", "a link"])
def test_a_lock_path_that_is_no_file_is_refused_naming_it(tmp_path, kind):
    """A link to a file elsewhere too: the lock record would be written over that file."""
    run = tmp_path / "run"
    run.mkdir()
    elsewhere = tmp_path / "elsewhere.txt"
    elsewhere.write_text("a user's file\n")
    if kind == "a folder":
        (run / LOCK_NAME).mkdir()
    else:
        (run / LOCK_NAME).symlink_to(elsewhere if kind == "a link" else tmp_path / "gone" / "lock")
    with pytest.raises(SystemExit) as stopped:
        MultirunDirs().on_run_start(_run(run))
    assert str(stopped.value) == (
        f"hydra.run.dir: {run / LOCK_NAME} is {kind}, where mode=train keeps its mark; remove "
        f"{run / LOCK_NAME}, or give this run another hydra.run.dir."
    )
    assert elsewhere.read_text() == "a user's file\n"


def test_a_run_dir_that_is_a_file_is_named_as_one(tmp_path):
    file = tmp_path / "results"
    file.write_text("x")
    with pytest.raises(SystemExit) as stopped:
        MultirunDirs().on_run_start(_run(file))
    assert str(stopped.value) == (
        f"hydra.run.dir: {file} is a file, not a folder; give this run another hydra.run.dir."
    )


@pytest.mark.parametrize(
    "lock", ['{"pid": 1, "sweep": null, "job": null}', "", "{not json", '{"writer": ["x"]}']
)
@pytest.mark.parametrize("saved", ["mode: train\n", "mode: train\r\n", None])
def test_a_mark_naming_no_writer_is_the_mode_hydra_saved_there(tmp_path, lock, saved):
    """An old run's .run.lock (before marks named their writer), an empty or unreadable one:
    its owner is the mode in the folder's .hydra/config.yaml, else train (the default mode);
    mode=eval never writes over such a training's files (the attack's A1), train goes on."""
    run = tmp_path / "run"
    (run / ".hydra").mkdir(parents=True)
    (run / LOCK_NAME).write_text(lock)
    if saved is not None:
        (run / ".hydra" / "config.yaml").write_text(f"model:\n  mode: eval\n{saved}seed: 1\n")
    with pytest.raises(SystemExit, match=r"is the folder of mode=train .*mode=eval would write"):
        MultirunDirs().on_run_start(OmegaConf.merge(_run(run), {"mode": "eval"}))
    MultirunDirs().on_run_start(OmegaConf.merge(_run(run), {"mode": "train"}))


def test_a_mark_naming_no_writer_is_the_mode_its_files_show(tmp_path):
    """An old evaluation's dir whose .hydra/config.yaml is gone (or says otherwise): its
    per_class.csv shows mode=eval wrote it, so a training never writes over it."""
    run = tmp_path / "run"
    (run / ".hydra").mkdir(parents=True)
    (run / LOCK_NAME).write_text('{"pid": 1}')
    (run / "per_class.csv").write_text("class,acc\n")
    with pytest.raises(SystemExit, match=r"is the folder of mode=eval \(its \.run\.lock names"):
        MultirunDirs().on_run_start(OmegaConf.merge(_run(run), {"mode": "train"}))
    (run / ".hydra" / "config.yaml").write_text("mode: train\n")
    with pytest.raises(SystemExit, match=r"is the folder of mode=eval"):
        MultirunDirs().on_run_start(OmegaConf.merge(_run(run), {"mode": "train"}))
    MultirunDirs().on_run_start(OmegaConf.merge(_run(run), {"mode": "eval"}))


def test_a_mark_that_is_a_hard_link_is_refused_and_its_file_untouched(tmp_path):
    run, elsewhere = tmp_path / "run", tmp_path / "elsewhere.txt"
    run.mkdir()
    elsewhere.write_text("a user's file\n")
    os.link(elsewhere, run / LOCK_NAME)
    with pytest.raises(SystemExit) as stopped:
        MultirunDirs().on_run_start(_run(run))
    assert str(stopped.value) == (
        f"hydra.run.dir: {run / LOCK_NAME} is a hard link (one file of 2 names), where "
        f"mode=train keeps its mark; remove {run / LOCK_NAME}, or give this run another "
        "hydra.run.dir."
    )
    assert elsewhere.read_text() == "a user's file\n"


def _multirun(sweep_dir: Path) -> object:
    return OmegaConf.create(
        {
            "hydra": {
                "run": {"dir": "x"},
                "sweep": {"dir": str(sweep_dir), "subdir": "${hydra.job.num}"},
            }
        }
    )


def test_a_sweep_dir_of_the_users_files_is_refused_before_the_first_job(tmp_path):
    mine = tmp_path / "study"
    mine.mkdir()
    (mine / "summary.csv").write_text("my,own\n1,2\n")
    (mine / "optimization_results.yaml").write_text("best: mine\n")  # the Optuna sweeper's
    with pytest.raises(SystemExit) as stopped:
        MultirunDirs().on_multirun_start(_multirun(mine))
    assert str(stopped.value) == _not_ours(
        "hydra.sweep.dir", mine, "optimization_results.yaml, summary.csv", "multirun", "a multirun"
    )
    assert sorted(p.name for p in mine.iterdir()) == ["optimization_results.yaml", "summary.csv"]
    (mine / SWEEP_LOCK_NAME).touch()  # a sweep's own folder, rerun into (summary.skip_completed)
    MultirunDirs().on_multirun_start(_multirun(mine))
    MultirunDirs().on_multirun_end(_multirun(mine))


def test_a_busy_lock_naming_its_multirun_but_not_its_job_is_one_line(tmp_path: Path) -> None:
    """The lock's record is hostile input (a hand edit): one naming a multirun without its job
    number stopped the refusal of a busy run dir with KeyError: 'job'."""
    run = tmp_path / "run"
    run.mkdir()
    record = {"pid": 12, "host": "h", "started": "t", "sweep": "/s", "writer": "mode=train"}
    (run / LOCK_NAME).write_text(json.dumps(record))
    with open(run / LOCK_NAME, "rb") as held:  # another open file: flock refuses this process
        fcntl.flock(held, fcntl.LOCK_EX | fcntl.LOCK_NB)
        with pytest.raises(
            RunDirInUse, match=r"in use by another run \(job \? of multirun /s, pid 12 "
        ):
            claim(run)
