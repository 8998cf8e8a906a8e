"""A stream's mid-epoch checkpoint, resumed on any topology without losing or repeating a sample.

A stream's order depends on how its shards are split over ranks and loader workers, so the
epoch's first batches can be replayed (the very batches, in the very order) only by a job with
the checkpoint's world size, loader.num_workers and loader.batch_size: that job replays them
(engine/runs/run_state.positioned), as an uninterrupted run would have gone on. For any other,
the checkpoint also holds which samples of the epoch were trained on: the split indices its
batches carried (engine/data/sample_ids.py; a training's stream always tags its samples),
as a bitmap (`TrainedSamples`), and the resumed job's stream leaves them out of that one pass
(`resume_without`): each sample of the epoch once, in another order. A stream that cannot
(no tags, no `resume_without`) is refused on another topology, in one line naming the fix.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch.utils.data import DataLoader, IterableDataset

from engine.data.sample_ids import SampleIds
from engine.runs.elastic import saved_topology
from engine.runs.run_records import STREAM_TRAINED, Topology
from engine.training.distributed import gather_objects

log = logging.getLogger(__name__)

KEY = STREAM_TRAINED  # in a mid-epoch checkpoint of a stream: {epoch, size, bits} or None


class TrainedSamples:
    """The split indices the current epoch of a stream has trained on, on every rank."""

    def __init__(self) -> None:
        self.epoch: int | None = None
        self.mask = np.zeros(0, bool)
        self.complete = True  # every batch of the epoch carried its ids
        # the pass began as an uninterrupted one would (or replayed such a start): a job of
        # the same topology can replay it; a pass that left samples out cannot be replayed
        self.replayable = True

    def add(self, epoch: int, ids: SampleIds | None) -> None:
        """The samples `ids` of one batch of `epoch` (None: an untagged batch) are trained on."""
        if epoch != self.epoch:
            self.epoch, self.mask, self.complete = epoch, np.zeros(0, bool), True
            self.replayable = True
        if ids is None:
            self.complete = False
            return
        indices = np.asarray(ids.indices, np.int64)
        if indices.size and indices.max() >= len(self.mask):
            self.mask = np.pad(self.mask, (0, int(indices.max()) + 1 - len(self.mask)))
        self.mask[indices] = True

    def state(self, epoch: int) -> dict[str, Any] | None:
        """What a checkpoint in the middle of `epoch` keeps: the samples all ranks trained on
        (every rank calls it), or None when some batch of it carried no ids."""
        mine = self.mask if self.epoch == epoch and self.complete else None
        masks = gather_objects(mine)
        if any(mask is None for mask in masks):
            return None
        size = max(len(mask) for mask in masks)
        union = np.zeros(size, bool)
        for mask in masks:
            union[: len(mask)] |= mask
        bits = torch.from_numpy(np.packbits(union))
        return {"epoch": epoch, "size": size, "bits": bits, "replayable": self.replayable}

    def load(self, state: dict[str, Any], leaving_out: bool) -> None:
        """Go on counting from a mid-epoch checkpoint's `state`, replayed or (`leaving_out`)
        with its trained samples left out; one that does not record its samples leaves this
        epoch's set incomplete (None when saved)."""
        saved = trained_in(state)
        self.epoch, self.complete = state["epoch"], saved is not None
        self.mask = saved if saved is not None else np.zeros(0, bool)
        self.replayable = not leaving_out and _replayable(state)


def _replayable(state: dict[str, Any]) -> bool:
    """Whether the pass `state` stopped began as an uninterrupted one (not a leave-out)."""
    record = state.get(KEY)
    return record is None or record.get("replayable", True)


def trained_in(state: dict[str, Any]) -> np.ndarray | None:
    """A mid-epoch checkpoint's trained samples as a bool per split index (None: unrecorded)."""
    record = state.get(KEY)
    if state["batches_done"] is None or record is None or record["epoch"] != state["epoch"]:
        return None
    return np.unpackbits(record["bits"].numpy(), count=record["size"]).astype(bool)


def _replays(state: dict[str, Any], here: Topology) -> bool:
    """Whether this job splits the stream as the checkpoint's did and the pass it stopped began
    as an uninterrupted one would, so it replays its batches."""
    saved = saved_topology(state, here)
    fields = ("world_size", "num_workers", "batch_size")
    return _replayable(state) and all(getattr(saved, f) == getattr(here, f) for f in fields)


def check_stream_resume(
    state: dict[str, Any], loader: DataLoader, here: Topology, path: Path
) -> None:
    """Refuse, in one line naming the keys and the fix, a mid-epoch resume of a stream on the
    topology `here` that could not train each remaining sample of the epoch once."""
    stream = loader.dataset
    if state["batches_done"] is None or not isinstance(stream, IterableDataset):
        return
    if _replays(state, here):
        return
    saved = saved_topology(state, here)
    name = type(stream).__name__
    where = (
        f"trainer.resume: {path} stopped {name} mid-epoch {state['epoch']} in a job of "
        f"{saved.world_size} process(es) x loader.num_workers={saved.num_workers} x "
        f"loader.batch_size={saved.batch_size}, this one has {here.world_size} x "
        f"{here.num_workers} x {here.batch_size}"
    )
    fix = (
        f"resume with {saved.world_size} process(es), loader.num_workers={saved.num_workers} "
        f"and loader.batch_size={saved.batch_size} (its batches are then replayed), or from "
        "a checkpoint saved at an epoch's end."
    )
    if not callable(getattr(stream, "resume_without", None)):
        raise ValueError(
            f"{where}, and {name} has no resume_without(epoch, trained) to leave out the "
            f"samples the epoch trained on (engine/data/datasets/base.py): {fix}"
        )
    if trained_in(state) is None:
        raise ValueError(
            f"{where}, and the checkpoint does not record which samples the epoch trained on "
            f"({name} yields them untagged, or an older engine wrote it): {fix}"
        )
    log.info(
        "trainer.resume: %s: the rest of epoch %d leaves out the samples it trained on, each "
        "sample once but in another order than an uninterrupted run (the stream is split over "
        "other ranks, workers or batches).",
        path,
        state["epoch"],
    )


def left_out(state: dict[str, Any], loader: DataLoader, here: Topology) -> np.ndarray | None:
    """The samples a stream resumed mid-epoch on another topology leaves out of that pass
    (checked by `check_stream_resume`); None: not a stream, or its batches are replayed."""
    if not isinstance(loader.dataset, IterableDataset) or _replays(state, here):
        return None
    return trained_in(state)
