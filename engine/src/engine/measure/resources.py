"""CPU time and resident memory of this process plus its loader workers."""

from __future__ import annotations

import psutil


class ProcessTreeMonitor:
    """Samples the summed RSS of this process and its children; totals their CPU time.

    RSS counts pages shared between forked workers once per process, so the sum is an
    upper bound on the physical memory used.
    """

    def __init__(self) -> None:
        self.root = psutil.Process()
        self.peak_rss_bytes = 0
        self._cpu_start = self._root_cpu()

    def _root_cpu(self) -> float:
        """This process's CPU plus that of its children already reaped (workers that exited)."""
        times = self.root.cpu_times()
        return times.user + times.system + times.children_user + times.children_system

    def sample(self) -> None:
        """Record the current summed RSS (call it while the workers are alive)."""
        total = self.root.memory_info().rss
        for child in self.root.children(recursive=True):
            try:
                total += child.memory_info().rss
            except psutil.NoSuchProcess:  # a worker that exited between listing and reading
                continue
        self.peak_rss_bytes = max(self.peak_rss_bytes, total)

    def cpu_seconds(self) -> float:
        """CPU seconds since construction: this process, exited workers and live workers."""
        total = self._root_cpu() - self._cpu_start
        for child in self.root.children(recursive=True):
            try:
                times = child.cpu_times()
            except psutil.NoSuchProcess:
                continue
            total += times.user + times.system
        return total
