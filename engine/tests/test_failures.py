"""A run of the reference project that fails says why in one line naming the file or the key,
and its log ends with it; a worker count far above the cores is capped with one warning."""

from __future__ import annotations

import logging
from dataclasses import replace
from pathlib import Path

from hydra.utils import instantiate

from engine.data import resolve_loader
from engine.data.samplers import SequentialOrder
from engine_dev.api import Labels
from engine_dev.cli import run_script
from tests.conftest import TRAIN, reference_args

USER_DATASET = """
class Broken:
    def __init__(self, split, transform=None, classes=None):
        open("/nonexistent/labels.txt")
"""


def _last_log_line(run: Path) -> str:
    """The error line of a failed run's log: the last but one (the last names the run dir)."""
    *_, error, last = (run / "train.log").read_text().strip().splitlines()
    assert "run dir: " in last and last.endswith("(FAILED; the traceback is in its train.log)")
    return error


def test_a_user_dataset_error_keeps_its_file_name(demo_dir: Path, tmp_path: Path) -> None:
    (tmp_path / "mydata").mkdir()
    (tmp_path / "mydata" / "__init__.py").write_text("")
    (tmp_path / "mydata" / "broken.py").write_text(USER_DATASET)
    run = tmp_path / "run"
    result = run_script(
        TRAIN,
        *reference_args(
            demo_dir,
            tmp_path,
            "~dataset",  # the dataset group left out: this node alone
            "+dataset._target_=mydata.broken.Broken",
            "allowed_targets_extra=[mydata.*]",
            f"hydra.run.dir={run}",
        ),
        cwd=tmp_path,
        env={"PYTHONPATH": str(tmp_path)},
    )
    assert result.returncode == 1
    named = "FileNotFoundError: [Errno 2] No such file or directory: '/nonexistent/labels.txt'"
    assert named in result.stderr  # not FileNotFoundError(2, 'No such file or directory')
    assert "mydata.broken.Broken" in result.stderr  # which target raised it
    raised = "(raised while building mydata.broken.Broken from the config)"
    assert _last_log_line(run).endswith(f"run failed: {named} {raised}")  # the one line


def test_a_config_error_is_the_last_line_of_the_log(demo_dir: Path, tmp_path: Path) -> None:
    run = tmp_path / "run"
    args = reference_args(demo_dir, tmp_path, "optimizer.lr=fast", f"hydra.run.dir={run}")
    result = run_script(TRAIN, *args, cwd=tmp_path)
    assert result.returncode == 1 and "optimizer.lr='fast'" in result.stderr
    assert "run failed: ConfigError: optimizer.lr='fast'" in _last_log_line(run)


def test_worker_counts_far_above_the_cores_are_capped(reference_cfg, monkeypatch, caplog) -> None:
    monkeypatch.setattr(resolve_loader, "available_cpus", lambda: 2)
    settings, data = instantiate(reference_cfg("run").loader), Labels([0, 1] * 8, 2)

    def workers(count: int) -> int:
        chosen = replace(settings, num_workers=count)
        return resolve_loader.resolve_loader_settings(
            chosen, data, SequentialOrder, False
        ).num_workers

    with caplog.at_level(logging.WARNING, logger="engine.data.resolve_loader"):
        assert workers(1000) == 8
        assert workers(8) == 8
    assert len(caplog.records) == 1 and "loader.num_workers=1000 is far above" in caplog.text
