"""The reference project's train.py with an injected fault, chosen by environment variables:
STOP_AT_STEP=N: every rank SIGTERMs itself after optimizer step N (a pre-emption);
KILL_AT_STEP=N: every rank SIGKILLs itself after optimizer step N (kill -9: no last save);
WAIT_AT_STEP=N: after step N the run creates the file READY_FILE and waits until the test has
deleted it (the test sends its signal from outside first)."""

from __future__ import annotations

import os
import runpy
import signal
import sys
import time
from pathlib import Path

REFERENCE = Path(__file__).resolve().parents[1] / "reference_project"
sys.path.insert(0, str(REFERENCE))

from reference.step import EmaStep  # noqa: E402

optimizer_step = EmaStep.optimizer_step
at = {
    name: int(os.environ.get(name, "0"))
    for name in ("STOP_AT_STEP", "KILL_AT_STEP", "WAIT_AT_STEP")
}


def stepping(self: EmaStep) -> None:
    optimizer_step(self)
    if self.steps == at["STOP_AT_STEP"]:
        signal.raise_signal(signal.SIGTERM)
    if self.steps == at["KILL_AT_STEP"]:
        os.kill(os.getpid(), signal.SIGKILL)
    if self.steps == at["WAIT_AT_STEP"]:
        ready = Path(os.environ["READY_FILE"])
        ready.write_text("ready")
        while ready.exists():  # the engine's handler takes the signal meanwhile
            time.sleep(0.05)


EmaStep.optimizer_step = stepping  # type: ignore[method-assign]
sys.argv = [str(REFERENCE / "train.py"), *sys.argv[1:]]
runpy.run_path(str(REFERENCE / "train.py"), run_name="__main__")
