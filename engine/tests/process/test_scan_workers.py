"""The loader workers of mode=cache, mode=shards and mode=validate end with their process: a
kill -9 of it leaves none behind, also where torch's own watchdog cannot tell (forkserver
workers, whose parent is the server, which lives on while they do)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

CHILD = """
import os, time
from torch.utils.data import Dataset
from engine.data.loaders import scan_loader


class Pids(Dataset):
    def __len__(self):
        return 100_000

    def __getitem__(self, index):
        return os.getpid()


if __name__ == "__main__":
    batches = iter(scan_loader(Pids(), 4, list, 2, "forkserver", 0))
    pids = set()
    while len(pids) < 2:
        pids |= set(next(batches))
    print(" ".join(map(str, sorted(pids))), flush=True)
    time.sleep(120)
"""


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0]
    except FileNotFoundError:
        return False
    return state != "Z"


def test_a_killed_writers_forkserver_workers_end_with_it(tmp_path: Path) -> None:
    script = tmp_path / "scan.py"
    script.write_text(CHILD)
    child = subprocess.Popen(
        [sys.executable, str(script)], stdout=subprocess.PIPE, text=True, cwd=tmp_path
    )
    try:
        workers = [int(pid) for pid in child.stdout.readline().split()]  # type: ignore[union-attr]
        assert len(workers) == 2 and all(map(_alive, workers))
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait()
    deadline = time.monotonic() + 20
    while any(map(_alive, workers)) and time.monotonic() < deadline:
        time.sleep(0.2)
    left = [pid for pid in workers if _alive(pid)]
    for pid in left:  # do not leave them to the rest of the suite
        os.kill(pid, signal.SIGKILL)
    assert not left, f"workers {left} outlived their killed process"
