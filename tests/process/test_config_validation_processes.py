"""A bad config on the console of train.py run as a user runs it, in a child process: the one
short message naming the key, no traceback, and no work done (the in-process checks:
engine/tests/test_config_checks.py, tests/reliability/test_config_validation.py)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_console_shows_the_message_not_a_traceback(demo_dir: Path, tmp_path: Path) -> None:
    command = [
        sys.executable,
        str(ROOT / "train.py"),
        f"paths.demo_dir={demo_dir}",
        f"hydra.run.dir={tmp_path / 'run'}",
        f"paths.log_dir={tmp_path}",
        "loader.batch_size=0",
    ]
    result = subprocess.run(command, cwd=tmp_path, capture_output=True, text=True)
    assert result.returncode == 1
    said = "run failed: ConfigError: loader.batch_size=0: expected int >= 1."
    assert [line for line in result.stderr.splitlines() if line.endswith(said)]
    assert "Traceback" not in result.stderr and len(result.stderr.splitlines()) <= 2
    assert not (tmp_path / "run" / "metrics.json").exists()
