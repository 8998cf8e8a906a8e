"""train.py in a child process, for tests of what a user sees on the command line."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def run_train(*args: str, cwd: Path, timeout: int = 120) -> subprocess.CompletedProcess:
    """train.py in a child process: a hang fails the test at `timeout` instead of the suite."""
    return subprocess.run(
        [sys.executable, str(ROOT / "train.py"), *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
