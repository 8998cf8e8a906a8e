"""A stalled or dead loader worker, explained with the samples (and files) it was reading."""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager

from engine.data.seeded import SeededSamples


def loader_failure(dataset: object, err: BaseException) -> RuntimeError | None:
    """A stalled or dead loader worker explained with the samples it was reading, or None
    when `err` is something else (sample errors already name their file)."""
    text = str(err).strip()
    if not isinstance(err, RuntimeError) or not text.startswith("DataLoader"):
        return None
    in_flight = dataset.in_flight if isinstance(dataset, SeededSamples) else None
    pids = re.search(r"pid(?:\(s\))? ([\d, ]+)", text)  # the workers that died, if named
    dead = {int(pid) for pid in re.findall(r"\d+", pids.group(1))} if pids else set()
    busy = in_flight(dead or None) if in_flight is not None else []
    reading = f" while reading {', '.join(busy)}" if busy else " (sample being read: unknown)"
    return RuntimeError(
        f"{text.rstrip('.')}{reading}. Check that file (mode=validate scans them all), raise "
        "loader.timeout for slow storage, or set loader.num_workers=0 to run the loading in "
        "the main process and see where it stops."
    )


@contextmanager
def loader_failures_named(dataset: object) -> Iterator[None]:
    """Around a loop consuming a loader: a stalled or dead worker's error (raised by torch
    wherever the loop is, a dead worker's from a signal handler) re-raised naming its files."""
    try:
        yield
    except RuntimeError as err:
        failure = loader_failure(dataset, err)
        if failure is None:
            raise
        raise failure from err
