"""`python train.py ARGS` run inside the test process (engine_dev.cli.run_script: how, and
what state it puts back), its runs' outputs kept out of the checkout."""

from __future__ import annotations

import atexit
import shutil
import subprocess
import tempfile
from pathlib import Path

from engine_dev.api import run_script

TRAIN = Path(__file__).resolve().parents[1] / "train.py"
LOG_DIR = "paths.log_dir="


def outside_the_checkout(args: tuple[str, ...] | list[str], cwd: Path) -> list[str]:
    """`args` with paths.log_dir set when they do not set it: <cwd>/outputs, or a temporary
    folder when `cwd` is the checkout (removed when the test process ends). Every run links
    outputs/latest* in its log dir, and a test's runs never write into the checkout
    (tests/conftest.py checks it)."""
    if any(arg.startswith((LOG_DIR, f"+{LOG_DIR}")) for arg in args):
        return list(args)
    here = cwd.resolve() == TRAIN.parent
    if here:
        log_dir = Path(tempfile.mkdtemp(prefix="test_outputs_"))
        atexit.register(shutil.rmtree, log_dir, ignore_errors=True)
    else:
        log_dir = cwd / "outputs"
    return [*args, f"{LOG_DIR}{log_dir}"]


def run_cli(
    *args: str, cwd: Path, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess:
    """`python train.py *args` in `cwd` with `env` added, in this process."""
    completed = run_script(TRAIN, *outside_the_checkout(args, cwd), cwd=cwd, env=env)
    completed.args = ["train.py", *args]
    return completed
