"""Child processes for the process tests: a script, or a torchrun job of it, started in a
session of its own with the launcher's variables cleared, its output in files (a pipe the test
leaves unread while it waits would stall a chatty child), and the whole group killed when the
test is interrupted (pytest-timeout, Ctrl-C) or past a deadline, so nothing is left running."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
from pathlib import Path
from types import TracebackType

LAUNCH_VARIABLES = (
    "RANK",
    "WORLD_SIZE",
    "LOCAL_RANK",
    "LOCAL_WORLD_SIZE",
    "MASTER_ADDR",
    "MASTER_PORT",
    "TORCHELASTIC_RUN_ID",
)


class Child:
    """`python script args`, or `torchrun --standalone --nproc_per_node=nproc script args`
    when `nproc` is given; a context manager that kills the group if it is still running."""

    def __init__(
        self, script: Path, *args: str, cwd: Path, nproc: int = 0, **env_vars: str
    ) -> None:
        launcher = ["-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={nproc}"]
        self.command = [sys.executable, *(launcher if nproc else []), str(script), *args]
        env = {k: v for k, v in os.environ.items() if k not in LAUNCH_VARIABLES} | env_vars
        self._out = tempfile.TemporaryFile("w+")  # noqa: SIM115 (closed in finish)
        self._err = tempfile.TemporaryFile("w+")  # noqa: SIM115
        self.process = subprocess.Popen(
            self.command,
            cwd=cwd,
            env=env,
            stdout=self._out,
            stderr=self._err,
            text=True,
            start_new_session=True,
        )

    def running(self) -> bool:
        return self.process.poll() is None

    def kill(self) -> None:
        """SIGKILL to the whole group (the agent, its ranks, their loader workers)."""
        if self.running():
            os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait()

    def finish(self, deadline_s: float | None = None) -> subprocess.CompletedProcess:
        """Wait for the child and return its exit code and output; past `deadline_s` its group
        is killed and subprocess.TimeoutExpired raised (the torchrun stress run counts hangs)."""
        try:
            self.process.wait(timeout=deadline_s)
        except BaseException:
            self.kill()
            raise
        outputs = []
        for file in (self._out, self._err):
            file.seek(0)
            outputs.append(file.read())
            file.close()
        return subprocess.CompletedProcess(self.command, self.process.returncode, *outputs)

    def __enter__(self) -> Child:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        self.kill()
        self._out.close()
        self._err.close()


def run_child(
    script: Path,
    *args: str,
    cwd: Path,
    nproc: int = 0,
    deadline_s: float | None = None,
    **env_vars: str,
) -> subprocess.CompletedProcess:
    """`Child(...)` run to its end (or its deadline)."""
    return Child(script, *args, cwd=cwd, nproc=nproc, **env_vars).finish(deadline_s)
