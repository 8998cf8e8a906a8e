"""The loader as composed stages: one collate in the workers, one list of stages in the main
process, and one DataLoader class that runs them (engine/data/loaders.py make_loader builds it).

In a worker, `WorkerCollate` sets the unreadable samples apart (dataset.decode.on_error=skip),
takes the samples' tags off (engine/data/sample_ids.py), collates the rest with the user's or
the kind's collate, timed (engine/measure/stages.py), and sends one `Delivery`: the batch and
its bad samples. In the main process `Loader` hands each delivery through its `stages` in
order, each a `BatchStage` (the batched decode, engine/data/encoded.py; the bad-sample ledger,
engine/data/bad_samples.py), and yields the batch that is left. A plain loader has no stages:
its batches pass as the workers made them.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

import torch
from torch.utils.data import DataLoader, default_collate

from engine.data.bad_samples import BadSample, Delivery
from engine.data.sample_ids import SampleIds, Tagged, split_ids
from engine.measure.stages import SUMS
from engine.measure.timing import labelled_batch_size

if TYPE_CHECKING:
    from engine.data.bad_samples import BadSampleLedger
    from engine.data.encoded import BatchDecoder


class BatchStage(Protocol):
    """A main-process stage: one delivery in, one out."""

    def __call__(self, delivery: Delivery) -> Delivery: ...


@dataclass(frozen=True)
class WorkerCollate:
    """A worker's collate: bad samples apart (`skip`), tags off (`tags`), the rest collated by
    `collate`, the batch's `StageTimes` appended (`times`), then its `SampleIds`. A batch that
    is no tuple or list (a collate_fn of the user's) takes neither: it goes as it is."""

    collate: Callable[[list[Any]], Any] = default_collate
    skip: bool = False  # dataset.decode.on_error=skip: BadSample records may come
    tags: bool = False  # samples may come as Tagged (a stream may be told to tag later)
    times: bool = False  # trainer.pipeline_timing / mode=benchmark's stage times

    def __call__(self, samples: Any) -> Delivery:
        bad = [s for s in samples if isinstance(s, BadSample)] if self.skip else []
        if bad:
            samples = [s for s in samples if not isinstance(s, BadSample)]
        return Delivery(self._batch(samples) if len(samples) else None, bad)

    def _batch(self, samples: Any) -> Any:
        ids = None
        if self.tags:
            if split_ids(samples)[1] is not None:
                return samples  # a batch a dataset fetched whole (returns_batches), tagged
            if isinstance(samples[0], Tagged):
                ids = SampleIds([s.index for s in samples])
                samples = [s.sample for s in samples]
        start = time.perf_counter()
        try:
            batch = self.collate(samples)
        except RuntimeError as err:  # torch.stack's own words name no key and no fix
            raise _unstackable(samples, err) or err from err
        ended = time.perf_counter()
        if not isinstance(batch, tuple | list):
            return batch
        if self.times:
            count = labelled_batch_size(batch) if len(batch) > 1 else len(samples)
            batch = (*batch, SUMS.take(count, ended - start, ended))
        return batch if ids is None else (*batch, ids)


def _shape(sample: Any) -> tuple[int, ...] | None:
    first = sample[0] if isinstance(sample, tuple | list) and sample else sample
    return tuple(first.shape) if isinstance(first, torch.Tensor) else None


def _unstackable(samples: Any, err: RuntimeError) -> ValueError | None:
    """Samples of different shapes, which a stacking collate cannot batch, said with the
    shapes and the keys that fix it; None for another error (it is raised as it is)."""
    shapes = [_shape(s) for s in samples] if isinstance(samples, list) else []
    differ = next((i for i, s in enumerate(shapes) if s is not None and s != shapes[0]), None)
    if not shapes or shapes[0] is None or differ is None:
        return None
    return ValueError(
        f"loader.collate_fn: the samples of a batch differ in shape (its sample 0 is "
        f"{shapes[0]}, its sample {differ} {shapes[differ]}), and the collate stacks them "
        f"({type(err).__name__}: {str(err).splitlines()[0]}): give every image one size in "
        "transforms.* (e.g. transforms=default), or pad token sequences (collate=pad)."
    )


class Loader(DataLoader):
    """The engine's DataLoader: its collate_fn a `WorkerCollate`, its deliveries handed through
    `stages` in order (the batched decode, then the bad-sample ledger: what of them it has);
    yields the clean batches. A batch left empty (every sample bad) is left
    out and counted in `dropped_batches`, so a checkpoint's position in the epoch stays exact;
    `len()` still counts the batches the sampler makes. Every consumer (the loop, evaluation,
    mode=benchmark, predict) iterates it alike."""

    def __init__(
        self,
        *args: Any,
        decoder: BatchDecoder | None = None,
        bad_samples: BadSampleLedger | None = None,
        **kwargs: Any,
    ) -> None:
        ordered = (decoder, bad_samples)  # what fails to decode joins the ledger's count
        self.stages: tuple[BatchStage, ...] = tuple(s for s in ordered if s is not None)
        self.decoder = decoder  # the batched decode, for the epoch line's limiting stage
        self.bad_samples = bad_samples  # this split's ledger (on_error=skip), else None
        self.per_source: dict[str, Loader] = {}  # a mix's val loader: one per source
        self.dropped_batches = 0  # batches left out in the current pass (every sample bad)
        super().__init__(*args, **kwargs)

    def __iter__(self) -> Iterator[Any]:  # type: ignore[override]
        self.dropped_batches = 0
        return self._delivered(super().__iter__())

    def _delivered(self, deliveries: Iterator[Delivery]) -> Iterator[Any]:
        for delivery in deliveries:
            for stage in self.stages:
                delivery = stage(delivery)
            if delivery.batch is None:
                self.dropped_batches += 1
            else:
                yield delivery.batch
