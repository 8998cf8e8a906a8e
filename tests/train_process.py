"""train.py in a child process, for tests of what a user sees on the command line."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from src.step import TrainStep
from tests.cli import outside_the_checkout

ROOT = Path(__file__).resolve().parents[1]
FAULTY = "tests.reliability.faulty.FaultyImageFolder"  # a dataset that misbehaves on purpose


def allowing(*entries: str) -> str:
    """The override that adds `entries` to conf/config.yaml's allowed_targets."""
    return f"allowed_targets_extra=[{','.join(entries)}]"


def run_train(
    *args: str, cwd: Path, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess:
    """train.py in a child process (with `env` added to the environment). A hang is failed
    by the suite's one hang guard, pytest-timeout (its interrupt kills the child), never by
    a wall-clock bound of the call's own, which a busy machine reaches."""
    return subprocess.run(
        [sys.executable, str(ROOT / "train.py"), *outside_the_checkout(args, cwd)],
        cwd=cwd,
        env={**os.environ, **(env or {})},
        capture_output=True,
        text=True,
        check=False,
    )


def kill_at_step(monkeypatch: pytest.MonkeyPatch, step: int) -> None:
    """Die right after optimizer step `step` (before its loss point and checkpoint), like
    kill -9 some steps after the last checkpoint."""
    original = TrainStep.optimizer_step

    def stepping(self: TrainStep) -> None:
        original(self)
        if self.steps == step:
            raise RuntimeError("killed")

    monkeypatch.setattr(TrainStep, "optimizer_step", stepping)
