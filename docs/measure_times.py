"""The times README.md states, measured: a fresh clone's `make setup`, `make train` and
`make test` (first, then again: warm), then a project made from it by `make new-project`: its
first `make test` (which makes its .venv and demo data first, as a user's does) and a second
one, one after the other on a quiet machine, printed as a table with the date and the machine.
Run by
`make docs-outputs` (the `timings` output); nothing else may state these times. What each
step printed (make test's slowest tests among it) is kept in outputs/measure_times/.

    .venv/bin/python docs/measure_times.py
"""

from __future__ import annotations

import os
import platform
import subprocess
import tempfile
import time
from datetime import date
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# (where, command, what it does): in the clone, then in the project made from it
STEPS = (
    ("clone", "make setup", "creates .venv and installs the engine and the pinned dependencies"),
    ("clone", "make train", "writes data/demo, then trains 12 epochs of the demo"),
    ("clone", "make test", "both test suites, then lint and the import contracts"),
    ("clone", "make test", "again, warm (Python's bytecode and pytest's caches written)"),
    (
        "clone",
        "make new-project DEST=../mine",
        "copies the template, the engine's wheel in vendor/",
    ),
    (
        "mine",
        "make test",
        "a new project's first: its .venv (the engine from vendor/), data, tests, lint",
    ),
    ("mine", "make test", "a new project's again, warm: its tests (the template suite), lint"),
)


LOGS = ROOT / "outputs" / "measure_times"  # what each step printed, by step


def timed(command: str, cwd: Path) -> float:
    """Seconds `command` took in `cwd`; its output goes to LOGS, and is shown when it fails."""
    start = time.monotonic()
    done = subprocess.run(command, shell=True, cwd=cwd, capture_output=True, text=True)
    LOGS.mkdir(parents=True, exist_ok=True)
    name = f"{cwd.name}_{command.split(' DEST=')[0].replace(' ', '_')}_{time.time_ns()}.log"
    (LOGS / name).write_text(done.stdout + done.stderr)
    if done.returncode != 0:
        raise SystemExit(f"{command} failed in {cwd}:\n{(done.stdout + done.stderr)[-3000:]}")
    return time.monotonic() - start


def machine() -> str:
    """The CPU, its usable cores and the Python: what the times depend on."""
    cpu = (
        next(
            (
                line.split(":", 1)[1].strip()
                for line in Path("/proc/cpuinfo").read_text().splitlines()
                if line.startswith("model name")
            ),
            platform.processor() or platform.machine(),
        )
        if Path("/proc/cpuinfo").exists()
        else platform.machine()
    )
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return f"{cpu}, {cores} cores, Python {platform.python_version()}"


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        clone = Path(tmp) / "clone"
        subprocess.run(["git", "clone", "-q", str(ROOT), str(clone)], check=True)
        times = [
            (command, what, timed(command, Path(tmp) / where)) for where, command, what in STEPS
        ]
    print(f"| on a fresh clone ({date.today()}), a quiet machine | what it does | wall |")
    print("|---|---|---|")
    for command, what, seconds in times:
        print(f"| `{command}` | {what} | {seconds / 60:.1f} min |")
    print(f"| machine | {machine()} | |")


if __name__ == "__main__":
    main()
