"""train.py in a child process, for tests of what a user sees on the command line."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FAULTY = "tests.reliability.faulty.FaultyImageFolder"  # a dataset that misbehaves on purpose


def allowing(*entries: str) -> str:
    """The override that adds `entries` to conf/config.yaml's allowed_targets."""
    return f"allowed_targets_extra=[{','.join(entries)}]"


def run_train(
    *args: str, cwd: Path, timeout: int = 120, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess:
    """train.py in a child process (with `env` added to the environment): a hang fails the
    test at `timeout` instead of the suite."""
    return subprocess.run(
        [sys.executable, str(ROOT / "train.py"), *args],
        cwd=cwd,
        env={**os.environ, **(env or {})},
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
