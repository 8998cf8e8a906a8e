"""The `loader` config group as a checked settings object, and which knobs can apply here."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

START_METHODS = (None, "fork", "spawn", "forkserver")
SHARING_STRATEGIES = (None, "file_descriptor", "file_system")  # None = torch's default


@dataclass(frozen=True)
class LoaderSettings:
    """DataLoader knobs of the train loader, as conf/loader/default.yaml writes them
    (`num_workers` null or auto until engine/data/resolve_loader.py decides the count)."""

    batch_size: int
    shuffle: bool
    num_workers: int | str | None
    collate_fn: Callable | None
    pin_memory: bool
    drop_last: bool
    prefetch_factor: int | None
    persistent_workers: bool
    timeout: float
    multiprocessing_context: str | None
    sharing_strategy: str | None = None

    def __post_init__(self) -> None:
        workers = self.num_workers
        checks = {
            "batch_size": (isinstance(self.batch_size, int) and self.batch_size >= 1, "int >= 1"),
            "num_workers": (
                workers is None or workers == "auto" or (isinstance(workers, int) and workers >= 0),
                "int >= 0, auto or null",
            ),
            "prefetch_factor": (  # batches held per worker: past 1024 it only fills memory
                self.prefetch_factor is None or 1 <= self.prefetch_factor <= 1024,
                "int from 1 to 1024 or null",
            ),
            "timeout": (self.timeout >= 0, "seconds >= 0"),
            "multiprocessing_context": (
                self.multiprocessing_context in START_METHODS,
                f"one of {START_METHODS}",
            ),
            "sharing_strategy": (
                self.sharing_strategy in SHARING_STRATEGIES,
                f"one of {SHARING_STRATEGIES}",
            ),
        }
        for key, (ok, expected) in checks.items():
            if not ok:
                raise ValueError(f"loader.{key}={getattr(self, key)!r}: expected {expected}.")

    def applicable(self, cuda: bool) -> tuple[LoaderSettings, list[str]]:
        """These settings without the knobs torch rejects or ignores here (prefetch,
        persistence and start method need workers; pinning needs CUDA), with a note for each;
        `num_workers` must be a count by now."""
        notes, changes = [], {}
        if self.num_workers == 0:
            changes["timeout"] = 0  # a limit on workers; the main process has none
            for key, off in (
                ("prefetch_factor", None),
                ("persistent_workers", False),
                ("multiprocessing_context", None),
            ):
                if getattr(self, key) != off:
                    changes[key] = off
                    notes.append(f"loader.{key}={getattr(self, key)} needs num_workers > 0: unset")
        if self.pin_memory and not cuda:
            changes["pin_memory"] = False
            notes.append("loader.pin_memory=true only helps CUDA copies: off on this device")
        return replace(self, **changes), notes
