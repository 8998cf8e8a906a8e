"""`python SCRIPT ARGS` run inside the test process: the script itself as `__main__` (so
Hydra finds conf/ beside it and launch() runs as from a shell), with sys.argv, the working
directory and the environment a shell would give it; its console output captured from the
file descriptors as a child's would be, its exit status returned. No interpreter and no
torch import to start: a test whose point is not a process (kill -9, signals, torchrun,
rlimits, concurrent starts) runs the command line here. The template's tests/cli.py and the
engine's own tests (its reference project) use it.

The process-wide state a run changes is put back afterwards: logging handlers (Hydra
configures its own), HydraConfig, the environment (PYTHONPATH on sys.path while it runs),
the working directory, torch's threads.
"""

from __future__ import annotations

import io
import logging
import os
import runpy
import subprocess
import sys
import tempfile
import traceback
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import torch
from hydra.core.hydra_config import HydraConfig


class Output:
    """What one stream received (`text` once the capture ended)."""

    text = ""


@contextmanager
def _captured(fd: int, name: str) -> Iterator[Output]:
    """File descriptor `fd` and `sys.<name>` written into a temporary file for the duration
    (loader workers inherit the descriptor, as a child's pipe)."""
    output = Output()
    with tempfile.TemporaryFile(mode="w+b") as sink:
        saved_fd, saved_stream = os.dup(fd), getattr(sys, name)
        saved_stream.flush()
        os.dup2(sink.fileno(), fd)
        stream = io.TextIOWrapper(
            os.fdopen(os.dup(fd), "wb"), encoding="utf-8", errors="replace", write_through=True
        )
        setattr(sys, name, stream)
        try:
            yield output
        finally:
            stream.flush()
            setattr(sys, name, saved_stream)
            stream.close()
            os.dup2(saved_fd, fd)
            os.close(saved_fd)
            sink.seek(0)
            output.text = sink.read().decode("utf-8", errors="replace")


@contextmanager
def _restored_state(cwd: Path, env: dict[str, str] | None) -> Iterator[None]:
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    environ, here, threads = dict(os.environ), os.getcwd(), torch.get_num_threads()
    path = list(sys.path)
    os.environ.update(env or {})
    os.chdir(cwd)
    # what the interpreter would import from: the script's folder, then PYTHONPATH
    sys.path[1:1] = [p for p in (env or {}).get("PYTHONPATH", "").split(os.pathsep) if p]
    try:
        yield
    finally:
        for handler in root.handlers:
            if handler not in handlers:
                handler.close()
        root.handlers[:] = handlers
        root.setLevel(level)
        HydraConfig.instance().cfg = None  # type: ignore[assignment]
        os.environ.clear()
        os.environ.update(environ)
        os.chdir(here)
        sys.path[:] = path
        torch.set_num_threads(threads)


def run_script(
    script: Path, *args: str, cwd: Path, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess:
    """`python script *args` in `cwd` with `env` added, in this process."""
    argv, code = sys.argv, 0
    with _restored_state(cwd, env), _captured(1, "stdout") as out, _captured(2, "stderr") as err:
        sys.argv = [str(script), *args]
        try:
            runpy.run_path(str(script), run_name="__main__")
        except SystemExit as stop:
            code = stop.code if isinstance(stop.code, int) else (0 if stop.code is None else 1)
            if not isinstance(stop.code, int | None):  # the interpreter prints such a message
                print(stop.code, file=sys.stderr)
        except Exception:  # what would end the process with a traceback (status 1)
            traceback.print_exc()
            code = 1
        finally:
            sys.argv = argv
    return subprocess.CompletedProcess([script.name, *args], code, out.text, err.text)
