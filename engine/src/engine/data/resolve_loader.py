"""`loader.*` -> the settings the DataLoaders run with: every rule in one place, in order.

conf/loader/default.yaml --instantiate--> LoaderSettings (types and ranges checked)
  --resolve_loader_settings()--> the final LoaderSettings, its changes logged in one line:
     num_workers  null: half the usable cores per rank, 0 for a dataset held in memory;
                  auto: measured (engine/data/autotune.py); N: as given, at most 4 per core
     knobs that cannot apply here are unset (LoaderSettings.applicable)
     a stream batched in several workers keeps its last partial batches (drop_last off)
     multiprocessing_context  null under torchrun: forkserver (a rank has threads to fork)
     host limits (/dev/shm, open files) that the workers would hit: a warning
  --build_loaders() --make_loader()--> DataLoader(...)   (engine/data/loaders.py)

Three functions after instantiate, each called once by engine/training/assemble.py; nowhere
else reinterprets a loader.* key (engine/docs/engine.md draws the path).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import replace

from torch.utils.data import Dataset, IterableDataset, Sampler

from engine.core.cpus import available_cpus, half_the_cores
from engine.data.autotune import measured_workers
from engine.data.limits import warn_host_limits
from engine.data.loader_settings import LoaderSettings

log = logging.getLogger(__name__)

WORKERS_PER_CPU = 4  # above this many workers per usable core, more only cost memory and start-up


def resolve_loader_settings(
    settings: LoaderSettings,
    dataset: Dataset,
    sampler_factory: Callable[[Dataset], Sampler],
    cuda: bool,
    world_size: int = 1,
) -> LoaderSettings:
    """The settings the loaders of `dataset` (the train split) run with; see the module
    docstring. What changed is logged in one line, host limits in warnings."""
    notes: list[str] = []
    workers = settings.num_workers  # null, auto or a count: decided here, once
    cap = WORKERS_PER_CPU * available_cpus()
    if workers is None and dataset.in_memory:  # type: ignore[attr-defined]
        kind = type(getattr(dataset, "dataset", dataset)).__name__  # inside SeededSamples
        notes.append(
            f"loader.num_workers=null: 0 for {kind}, held in memory and sliced per batch, "
            "which workers only slow down (set a count to use workers)"
        )
        workers = 0
    elif workers is None:
        workers = half_the_cores()
    elif workers == "auto":
        if world_size > 1:
            raise ValueError(
                "loader.num_workers=auto: the ranks of a distributed job would time each other; "
                "measure in one process, then set loader.num_workers=N."
            )
        workers = measured_workers(dataset, settings, sampler_factory)
    elif workers > cap:  # type: ignore[operator]
        log.warning(
            "loader.num_workers=%d is far above the %d usable CPU cores: capped at %d (%d per "
            "core; more workers only add memory and start-up time).",
            workers,
            available_cpus(),
            cap,
            WORKERS_PER_CPU,
        )
        workers = cap
    settings, unset = replace(settings, num_workers=workers).applicable(cuda)
    notes += unset
    if isinstance(dataset, IterableDataset) and workers > 0 and settings.drop_last:
        # each worker batches its own shards: drop_last would drop every worker's last batch
        notes.append(
            "loader.drop_last=true would drop each worker's last partial batch of the stream: "
            "off, so every sample is used once per epoch"
        )
        settings = replace(settings, drop_last=False)
    if workers > 0 and settings.multiprocessing_context is None and world_size > 1:
        # A rank runs threads (the process group's, the loaders' queue feeders), and a fork
        # while one of them holds the interpreter's thread-list lock leaves the worker stuck
        # in os.fork() for good: CPython gh-112275, in this pin's Python 3.11.7; Python 3.14
        # made forkserver Linux's default for such reasons. Its server starts by exec, alone.
        notes.append(
            "loader.multiprocessing_context=forkserver under torchrun: forking a rank, which "
            "runs threads, can hang a worker in os.fork() (CPython gh-112275); set "
            "loader.multiprocessing_context=fork to fork anyway"
        )
        settings = replace(settings, multiprocessing_context="forkserver")
    if notes:
        log.info("Loader settings adjusted: %s.", "; ".join(notes))
    warn_host_limits(settings, dataset)
    return settings
