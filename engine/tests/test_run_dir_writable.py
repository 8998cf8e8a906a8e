"""A paths.log_dir (or run dir) that cannot be written stops the run in one line naming the
key and the folder, before Hydra fails on it with a bare PermissionError."""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from omegaconf import OmegaConf

from engine.runs.bookends import point_latest
from engine.runs.run_lock import MultirunDirs

pytestmark = pytest.mark.skipif(
    not hasattr(os, "geteuid") or os.geteuid() == 0, reason="root writes into read-only folders"
)


@pytest.fixture
def read_only(tmp_path: Path) -> Iterator[Path]:
    folder = tmp_path / "outputs"
    folder.mkdir()
    folder.chmod(0o555)
    yield folder
    folder.chmod(0o755)


def _config(log_dir: Path, run_dir: str = "${paths.log_dir}/runs/1") -> object:
    sweep = {"dir": "${paths.log_dir}/multiruns/1", "subdir": "${hydra.job.num}"}
    return OmegaConf.create(
        {
            "paths": {"log_dir": str(log_dir)},
            "hydra": {"run": {"dir": run_dir}, "sweep": sweep, "job": {"name": "train"}},
        }
    )


def test_a_read_only_log_dir_is_one_line_naming_the_key(read_only: Path) -> None:
    with pytest.raises(SystemExit) as stopped:
        MultirunDirs().on_run_start(_config(read_only))
    said = str(stopped.value)
    assert said.startswith(f"paths.log_dir: cannot write {read_only}/runs/1 (Permission denied")
    assert "set paths.log_dir to a folder you can write" in said and "\n" not in said
    with pytest.raises(SystemExit, match=r"^paths\.log_dir: cannot write .*multiruns/1"):
        MultirunDirs().on_multirun_start(_config(read_only))


def test_a_read_only_run_dir_names_hydra_run_dir(read_only: Path, tmp_path: Path) -> None:
    config = _config(tmp_path / "elsewhere", run_dir=str(read_only))
    with pytest.raises(SystemExit, match=rf"^hydra\.run\.dir: cannot write {read_only} \("):
        MultirunDirs().on_run_start(config)


def test_latest_links_in_a_log_dir_that_cannot_be_made_are_a_warning(
    read_only: Path, tmp_path: Path, caplog
) -> None:
    run = tmp_path / "run"
    run.mkdir()
    with caplog.at_level(logging.WARNING):
        assert point_latest(read_only / "sub", run, "train") is None
    assert f"paths.log_dir={read_only}/sub cannot be made (Permission denied)" in caplog.text
