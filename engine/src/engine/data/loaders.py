"""Train and val DataLoaders from resolved settings (engine/data/resolve_loader.py), a train
order (the sampler group) and the datasets."""

from __future__ import annotations

import gc
import logging
import math
import multiprocessing
import multiprocessing.forkserver
import os
import select
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
import torch.multiprocessing as torch_mp
from torch.utils.data import (
    DataLoader,
    Dataset,
    IterableDataset,
    RandomSampler,
    Sampler,
    SequentialSampler,
    default_collate,
)

from engine.data.bad_samples import REPORT_NAME, BadSampleLedger
from engine.data.batch_stages import Loader, WorkerCollate
from engine.data.batched_geometry import Geometry
from engine.data.collate import already_batched
from engine.data.datasets.base import StreamDataset
from engine.data.encoded import BatchDecoder, encoded_collate
from engine.data.image_header import MAX_JPEG_SCANS
from engine.data.loader_settings import LoaderSettings
from engine.data.mix import Stratum
from engine.data.sample_ids import tag_samples
from engine.data.samplers import EpochSampler, RandomOrder, SequentialOrder
from engine.data.sharding import share_train, val_order
from engine.data.wrapper import SubsetView
from engine.measure.stages import SUMS

RANDOM_ORDERS = (RandomOrder, RandomSampler)
SEQUENTIAL_ORDERS = (SequentialOrder, SequentialSampler)

log = logging.getLogger(__name__)


def _train_order(
    dataset: Dataset, sampler: Sampler, shuffle: bool, notes: list[str]
) -> Sampler | None:
    """Reconcile `sampler` with `loader.shuffle`: random order only when both ask for it."""
    name = type(sampler).__name__
    if isinstance(sampler, RANDOM_ORDERS) and not shuffle:
        notes.append("loader.shuffle=false: train order is sequential (sampler=random not used)")
        sampler = SequentialOrder(dataset)  # a mix: its epoch population, in order
    elif isinstance(sampler, SEQUENTIAL_ORDERS) and shuffle:
        notes.append("sampler=sequential: train order is sequential, loader.shuffle=true unused")
    elif not isinstance(sampler, RANDOM_ORDERS + SEQUENTIAL_ORDERS) and shuffle:
        notes.append(f"loader.shuffle=true unused: the {name} sets the train order")
    if isinstance(dataset, IterableDataset):
        if not isinstance(sampler, RANDOM_ORDERS + SEQUENTIAL_ORDERS):
            raise ValueError(
                f"sampler: a {name} needs a map-style dataset, but {type(dataset).__name__} "
                "streams its samples; use sampler=random or sampler=sequential."
            )
        dataset.shuffle = isinstance(sampler, RANDOM_ORDERS)  # type: ignore[attr-defined]
        return None
    return sampler


def _idle_workers(dataset: Dataset, workers: int, notes: list[str]) -> None:
    shards = dataset.local_shards if isinstance(dataset, StreamDataset) else None  # this rank's
    if shards is not None and workers > len(shards):
        notes.append(
            f"loader.num_workers={workers} > {len(shards)} shards: "
            f"{workers - len(shards)} workers stay idle"
        )


def build_loaders(
    train_set: Dataset,
    val_set: Dataset,
    settings: LoaderSettings,
    sampler_factory: Callable[[Dataset], Sampler],
    report_dir: Path | None = None,
    rank: int = 0,
    world_size: int = 1,
    val_limit: int | None = None,
    tag_train: bool = False,
    time_train: bool = False,
) -> tuple[Loader, Loader]:
    """Train loader from resolved `settings` and the sampler group's order; val loader: same
    knobs, in order, no drop (with `val_limit`, that many samples spread over the classes).
    With dataset.decode.on_error=skip, unreadable samples are listed in `report_dir`/bad_samples.csv.
    In a distributed job both yield only rank `rank`'s share (engine/data/sharding.py).
    `tag_train`: train batches carry their samples' ids (engine/data/sample_ids.py);
    `time_train`: their stage times (engine/measure/stages.py)."""
    if tag_train:
        tag_samples(train_set)
    notes: list[str] = []
    sampler = _train_order(train_set, sampler_factory(train_set), settings.shuffle, notes)
    share_train(train_set, sampler, rank, world_size)
    _idle_workers(train_set, settings.num_workers, notes)  # type: ignore[arg-type]
    per_epoch = len(sampler) if sampler is not None else len(train_set)  # type: ignore[arg-type]
    if settings.drop_last and per_epoch < settings.batch_size:
        raise ValueError(
            f"loader.batch_size={settings.batch_size} exceeds the {per_epoch} train samples per "
            "epoch, and loader.drop_last=true would drop them all: lower the batch size."
        )
    if notes:
        log.info("Train order: %s.", "; ".join(notes))
    val_sampler = val_order(val_set, rank, world_size, val_limit)
    val_loader = make_loader(val_set, settings, val_sampler, False, "val", report_dir)
    val_loader.per_source = {
        stratum.name: _source_loader(
            val_set, stratum, val_loader, settings, rank, world_size, val_limit
        )
        for stratum in getattr(val_set, "sources", ())
    }
    return (
        make_loader(
            train_set, settings, sampler, settings.drop_last, "train", report_dir, time_train
        ),
        val_loader,
    )


def exit_with(pid: int) -> None:
    """End this process as soon as process `pid` ends, even by kill -9 (a thread waits on its
    pidfd). A forkserver-started worker needs it: torch's worker watchdog watches the parent,
    which is the forkserver, and CPython hands the server's liveness pipe to every process it
    forks (multiprocessing/forkserver.py, connect_to_new_process), so once the main process
    dies the server lives for its workers and the workers for their parent: both forever,
    holding memory and the job's output pipes (seen: a killed torchrun job's ranks left 2
    servers and 4 workers behind). Without pidfds (not Linux 5.3+) torch's watchdog is all."""
    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:  # already gone
        os._exit(1)
    except (AttributeError, OSError):
        return

    def wait() -> None:
        select.select([fd], [], [])
        os._exit(1)

    threading.Thread(target=wait, name="exit-with-main-process", daemon=True).start()


def scan_loader(
    dataset: Dataset,
    batch_size: int,
    collate: Callable[[list], Any],
    workers: int,
    context: str | None = None,
    timeout: float = 0.0,
) -> DataLoader:
    """A loader reading `dataset` once, in order, in `workers` processes started by `context`
    (mode=cache, mode=shards, mode=validate): its workers start as a training's do
    (`WorkerStart`), so they end with this process and a kill -9 of a writer leaves none."""
    return DataLoader(
        dataset,
        batch_size=batch_size,
        num_workers=workers,
        collate_fn=collate,
        multiprocessing_context=context if workers > 0 else None,
        timeout=timeout if workers > 0 else 0,
        worker_init_fn=WorkerStart(torch_mp.get_sharing_strategy(), os.getpid())
        if workers
        else None,
    )


def _source_loader(
    val_set: Dataset,
    stratum: Stratum,
    val_loader: Loader,
    settings: LoaderSettings,
    rank: int,
    world_size: int,
    val_limit: int | None,
) -> Loader:
    """A mix's val loader of one source, whole (or its share of `val_limit`), for evaluate's
    val/<source>/* metrics; in a distributed job this rank's disjoint share of it. Its
    unreadable samples go to `val_loader`'s ledger (their indices are the whole split's)."""
    view = SubsetView(val_set, range(stratum.start, stratum.stop), stratum.name)
    whole = len(val_set)  # type: ignore[arg-type]
    limit = None if val_limit is None else max(1, math.ceil(val_limit * len(view) / whole))
    order = val_order(view, rank, world_size, limit)
    return make_loader(view, settings, order, False, "val", bad_samples=val_loader.bad_samples)


@dataclass(frozen=True)
class WorkerStart:
    """What each loader worker does first. It puts every object inherited from the main
    process out of the garbage collector's reach: its passes would write to them and so copy
    their shared pages into each worker (40-80 MB a worker, whatever the dataset;
    BENCHMARKS.md). It sets the main process's `sharing_strategy`, which a forked worker
    inherits but a forkserver or spawn one would not (they start from a fresh torch). It ends
    the worker with the main process `main_pid` (`exit_with`), and times its batches' stages
    when the loader's do (`time_stages`)."""

    sharing_strategy: str
    main_pid: int
    time_stages: bool = False  # time the batch's stages (engine/measure/stages.py)

    def __call__(self, worker_id: int) -> None:
        SUMS.reset()  # a forked worker starts with its parent's stage sums
        SUMS.enabled = self.time_stages
        torch_mp.set_sharing_strategy(self.sharing_strategy)
        exit_with(self.main_pid)
        gc.freeze()


def start_forkserver(dataset: Dataset) -> None:
    """Start this process's forkserver now, importing torch, the engine's loaders and
    `dataset`'s modules once: the workers are forked from it, so they need not import them
    each (torch alone takes seconds), and its start overlaps the rest of the set-up instead
    of the first batch. Started by exec, the server has no threads to inherit; once it runs,
    a later call changes nothing."""
    kinds = {type(dataset), type(getattr(dataset, "dataset", dataset))}  # inside SeededSamples
    modules = ["__main__", "torch", __name__, *sorted(kind.__module__ for kind in kinds)]
    multiprocessing.set_forkserver_preload(modules)
    multiprocessing.forkserver.ensure_running()


def make_loader(
    dataset: Dataset,
    settings: LoaderSettings,
    sampler: Sampler | None,
    drop_last: bool,
    split: str = "train",
    report_dir: Path | None = None,
    time_stages: bool = False,
    bad_samples: BadSampleLedger | None = None,
) -> Loader:
    """One `Loader` (engine/data/batch_stages.py) from resolved `settings`; batched datasets
    skip collation. With `time_stages` each batch carries its `StageTimes`
    (engine/measure/stages.py). Its stages, in order: the batched decode
    (dataset.decode.device=main|cuda), then the ledger of unreadable samples
    (dataset.decode.on_error=skip: reported in `report_dir`/bad_samples.csv; `bad_samples`
    shares another loader's, as a mix's source loaders share the val loader's).
    """
    collate = settings.collate_fn
    if collate is None:
        collate = already_batched if dataset.returns_batches else default_collate
    skip = dataset.on_error == "skip"
    decoder = _batched_decoder(dataset, settings, split, skip)
    if decoder is not None:
        collate = encoded_collate
    if skip and bad_samples is None:
        report = report_dir / REPORT_NAME if report_dir is not None else None
        fraction = dataset.max_bad_fraction  # type: ignore[attr-defined]
        size = len(dataset)  # type: ignore[arg-type]
        bad_samples = BadSampleLedger(split, size, fraction, report)
    # a stream may be told to tag its samples later (a training's)
    tags = getattr(dataset, "tags_samples", False) or isinstance(dataset, IterableDataset)
    strategy = torch_mp.get_sharing_strategy()
    start = WorkerStart(strategy, os.getpid(), time_stages) if settings.num_workers else None
    if settings.num_workers and settings.multiprocessing_context == "forkserver":
        start_forkserver(dataset)
    return Loader(
        dataset,
        decoder=decoder,
        bad_samples=bad_samples,
        batch_size=settings.batch_size,
        sampler=sampler,
        num_workers=settings.num_workers,
        collate_fn=WorkerCollate(collate, skip, tags, time_stages),
        pin_memory=settings.pin_memory,
        drop_last=drop_last,
        prefetch_factor=settings.prefetch_factor,
        persistent_workers=settings.persistent_workers,
        timeout=settings.timeout,
        multiprocessing_context=settings.multiprocessing_context,
        worker_init_fn=start,
        # its own generator (worker base seeds) from the run's seed: iterating a loader never
        # draws from the global RNG, so model randomness is the same in resumed runs
        generator=torch.Generator().manual_seed(torch.initial_seed()),
    )


def _batched_decoder(
    dataset: Dataset, settings: LoaderSettings, split: str, skip: bool
) -> BatchDecoder | None:
    """The main process's batched decode for dataset.decode.device=main|cuda (None: the
    workers decode). The dataset (under its seeding and fold wrappers) is told the split's
    crops, which its workers draw and send with each encoded image (its `sends_encoded`); a
    pipeline without a batched form is refused here, at start."""
    decode_on = getattr(dataset, "decode_device", "cpu")
    if decode_on == "cpu":
        return None
    if settings.collate_fn is not None:
        raise ValueError(
            f"dataset.decode.device={decode_on} sends encoded images, which "
            "loader.collate_fn cannot stack: unset loader.collate_fn, or decode in the "
            "workers (dataset.decode.device=cpu)."
        )
    key = f"transforms.{'train' if split == 'train' else 'val'}"
    geometry = Geometry.of(dataset.transform, key)  # type: ignore[attr-defined]
    inner = dataset
    while isinstance(getattr(inner, "dataset", None), Dataset):  # SeededSamples, folds
        inner = inner.dataset  # type: ignore[attr-defined]
    inner.sends_encoded = geometry  # type: ignore[attr-defined]
    device = torch.device("cuda", torch.cuda.current_device()) if decode_on == "cuda" else None
    return BatchDecoder(
        device or torch.device("cpu"),
        geometry,
        dataset.max_image_pixels,  # type: ignore[attr-defined]
        skip,
        list(dataset.classes),  # type: ignore[attr-defined]
        getattr(dataset, "max_jpeg_scans", MAX_JPEG_SCANS),
    )


def set_epoch(loader: DataLoader, epoch: int) -> None:
    """Select `epoch`'s train order and random draws: the sampler's order and the dataset's
    per-sample seeds (a stream reshuffles its shards)."""
    if isinstance(loader.sampler, EpochSampler):
        loader.sampler.set_epoch(epoch)
    loader.dataset.set_epoch(epoch)  # type: ignore[attr-defined]


def endless(loader: DataLoader) -> Iterator[Any]:
    """Batches across epoch boundaries, so a short loader can be timed for many batches."""
    while True:
        empty = True
        for batch in loader:
            empty = False
            yield batch
        if empty:
            raise RuntimeError("the train loader yielded no batches; check loader.batch_size.")
