"""What mode=benchmark reads of its process tree (ProcessTreeMonitor): the CPU time counts a
child process that already exited, as a loader's workers have by the end of a pass."""

from __future__ import annotations

import subprocess
import sys

from engine.measure.resources import ProcessTreeMonitor


def test_cpu_time_counts_workers_that_already_exited() -> None:
    monitor = ProcessTreeMonitor()
    burn = "import time\nt = time.process_time()\nwhile time.process_time() - t < 0.3: pass"
    subprocess.run([sys.executable, "-c", burn], check=True)
    assert monitor.cpu_seconds() >= 0.3
