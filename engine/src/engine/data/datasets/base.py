"""The dataset contract, written once: what the template needs from a dataset and the optional
hooks it reads, with their defaults.

A dataset kind is a class the `dataset` config group names; `build_splits` makes one per split:
``cls(split="train" | "val" | "test", transform=<that split's pipeline or None>,
classes=<None for train, the train split's class names for the others>, **your YAML keys)``
(test: only mode=eval asks, and only of kinds whose `splits` name it). It subclasses `MapDataset`
(samples by index) or `StreamDataset` (an IterableDataset) and yields ``(input, label)``
samples: a uint8 C x H x W image (or float features, or a token tensor) and an int label.

Attributes:
    classes (list[str]): required. Class names; label ``i`` is ``classes[i]``. The val split
        takes the train split's list. Read by build_splits, the model (num_classes), metrics.
    targets (np.ndarray | None): every sample's label in index order, or None. Read by
        sampler=weighted, loss.class_weights=balanced, k-fold and mode=inspect. A multi-label
        dataset's is a uint8 multi-hot array, one row of ``len(classes)`` 0/1 per sample.
    multi_label (bool): a sample has any number of the classes: its label is a float32
        multi-hot tensor of ``len(classes)`` (the batch's labels: N x classes), for loss=bce and
        metrics=multilabel. Read by the config checks, the modes and the samplers.
    returns_batches (bool): ``__getitems__(indices)`` returns a whole collated batch, so the
        loaders skip collation (in-memory tensors). Read by engine/data/loaders.py.
    in_memory (bool): samples are slices of memory: ``loader.num_workers=null`` then means 0
        workers. Read by engine/data/resolve_loader.py.
    draws_random (bool): a fetch may draw random numbers (a random transform), so SeededSamples
        seeds it from (seed, epoch, index). Read by engine/data/seeded.py.
    on_error (str): ``raise`` or ``skip``: with skip, an unreadable sample is returned as a
        `BadSample` and left out. Read by engine/data/loaders.py.
    max_bad_fraction (float): with skip, the share of a split that may be unreadable.
    files_checkable (bool): `check_sample` decodes the file behind a sample (mode=validate).
    vocab_size (int | None): token datasets: ids are below it; the val split takes the train
        split's, and a model key ``vocab_size: ???`` is filled from it. Read by build_splits.
    splits (tuple[str, ...]): the splits the class can build, ``("train", "val")`` by default;
        ``"test"`` when it reads a test split (mode=eval eval.split=test). Read by build_split.
    shuffle (bool): a stream shuffles itself (set by the loaders from the sampler group).
    tags_samples (bool): a stream yields each sample as ``engine.api.Tagged(sample,
        index in the split)`` (set by the loaders when the run records its samples); map-style
        samples are tagged by the engine.
    drawn_split (bool): the train and val splits were drawn from one listing (imagefolder's
        ``dataset.val_fraction``): the run lists every file's split in split.csv (needs
        ``get_filename``). Read by engine/training/assemble.py.
    sources (tuple[Stratum, ...]): a concatenation of named sources (``dataset=mix``): each
        one's index range [start, stop) and epoch weight; empty for a single source. Read by
        the train orders (with ``epoch_samples``) and the val loaders (``val/<source>/*``).
    epoch_samples (int | None): the train split draws this many samples an epoch from
        ``sources`` in their weights' proportions (engine/data/mix.py); None: every index once.
        Read by the train orders (engine/data/samplers.py).
    blocks (np.ndarray | None): samples are stored in blocks read whole (dataset=parquet's
        row groups): each block's first index, ascending from 0. sampler=random then orders
        the blocks at random and shuffles within windows of ``shuffle_window`` samples, so
        reads stay sequential (engine/data/samplers.py block_order); None: any order is cheap.
    shuffle_window (int): with ``blocks``, the run of train positions shuffled together.
    decode_device (str): ``cpu`` (the workers decode), ``main`` or ``cuda``: the dataset can
        send its images' encoded bytes (``engine.data.encoded.Encoded``) instead, for a
        batched decode in the main process; it does while ``sends_encoded`` holds the split's
        crops (an ``engine.data.batched_geometry.Geometry``, set by the loaders for their
        workers alone), whose draws it makes for each image. Read by engine/data/loaders.py.

Methods (optional):
    get_filename(index) -> str | None: the file behind a sample, named in errors and reports.
    check_sample(index) -> BadSample | None: decode sample ``index``; its record if unreadable.
    set_epoch(epoch): called before each epoch's pass (streams reshuffle their shards).
    sample_source(index) -> (str, int): the source a sample comes from and its index there;
        ``("", index)`` for a single source. Read by samples.csv (trainer.record_samples).

Streams (`StreamDataset`) also provide ``distribute(rank, world_size)`` (read only this rank's
share, needed under torchrun) and ``local_shards`` (the shards this rank reads, or None), and
may provide ``resume_without(epoch, trained)``: leave the samples ``trained`` (a bool numpy
array over the split's indices) out of the pass of ``epoch``, its ``__len__`` then counting what
is left, so a mid-epoch checkpoint resumes on another number of ranks or loader workers
(engine/runs/stream_resume.py; without it such a resume is refused). It needs ``tags_samples``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import ClassVar

import numpy as np
import torch
from torch.utils.data import Dataset, IterableDataset

from engine.data.bad_samples import BadSample
from engine.data.batched_geometry import Geometry
from engine.data.decode import SampleError, describe_error
from engine.data.mix import Stratum

Transform = Callable[[torch.Tensor], torch.Tensor]  # a split's pipeline: uint8 image in, out


class DatasetHooks:
    """The optional hooks of the contract with their defaults (see the module docstring)."""

    classes: list[str]
    targets: np.ndarray | None = None
    multi_label: bool = False
    returns_batches: ClassVar[bool] = False
    in_memory: ClassVar[bool] = False
    draws_random: bool = True
    on_error: str = "raise"
    max_bad_fraction: float = 0.0
    files_checkable: ClassVar[bool] = False
    vocab_size: int | None = None
    shuffle: bool = False
    tags_samples: bool = False
    drawn_split: bool = False
    splits: ClassVar[tuple[str, ...]] = ("train", "val")
    sources: tuple[Stratum, ...] = ()
    epoch_samples: int | None = None
    blocks: np.ndarray | None = None
    shuffle_window: int = 0
    decode_device: str = "cpu"
    sends_encoded: Geometry | None = None

    def get_filename(self, index: int) -> str | None:
        """The file behind sample `index`; None for data that has no files."""
        return None

    def sample_source(self, index: int) -> tuple[str, int]:
        """The source sample `index` comes from and its index there (one source: its own)."""
        return "", int(index)

    def check_sample(self, index: int) -> BadSample | None:
        """Decode sample `index`: None if it reads, else its record (needs files_checkable)."""
        raise NotImplementedError(f"{type(self).__name__} has no files to check")

    def set_epoch(self, epoch: int) -> None:
        """Prepare the pass of `epoch` (nothing to do unless the dataset depends on it)."""


class DecodedSamples(DatasetHooks):
    """Samples decoded from files (or cache entries, or shard members), with one account of
    ``dataset.decode.on_error``: an unreadable sample is a `SampleError` naming it, or with
    ``on_error="skip"`` its `BadSample` record. `check_sample` decodes through `_decoded`."""

    def label_name(self, index: int) -> str | None:
        """The class name of sample `index`, for messages (None: no class)."""
        return None

    def _decoded(self, index: int) -> object:
        """Sample `index` decoded without the transform; a `SampleError` if it cannot be."""
        raise NotImplementedError(f"{type(self).__name__} has no files to check")

    def check_sample(self, index: int) -> BadSample | None:
        """Decode sample `index` (no transform): None if it reads, else its `BadSample`."""
        try:
            self._decoded(index)
        except SampleError as err:
            return self._bad(index, err)
        return None

    def _bad(
        self,
        index: int,
        err: Exception,
        *,
        path: str | None = None,
        label: str | None = None,
        reason: str | None = None,
    ) -> BadSample:
        """The record of unreadable sample `index`: by default its file, its class name ("" for
        none) and the description of what caused `err`."""
        return BadSample(
            int(index),
            (self.get_filename(index) or "") if path is None else path,
            (self.label_name(index) if label is None else label) or "",
            describe_error(err.__cause__ or err) if reason is None else reason,
        )

    def _skip_or_raise(self, index: int, err: Exception, **record: str) -> BadSample:
        """`err` raised, or with ``on_error="skip"`` the record of sample `index` (`_bad`, its
        `path`, `label` or `reason` as given)."""
        if self.on_error != "skip":
            raise err
        return self._bad(index, err, **record)


class MapDataset(DatasetHooks, Dataset):
    """A dataset of indexed samples (``__len__`` and ``__getitem__``) under the contract."""


class StreamDataset(DatasetHooks, IterableDataset):
    """A stream of samples (``__iter__``, and ``__len__`` for the schedule) under the contract."""

    local_shards: list[str] | None = None

    def distribute(self, rank: int, world_size: int) -> None:
        """Read only rank `rank`'s share of the stream in a job of `world_size` processes."""
        raise NotImplementedError(
            f"{type(self).__name__} streams its samples without distribute(rank, world_size), "
            "so each rank would read all of them; implement it (as engine/data/datasets/"
            "tar_shards.py does) or run one process."
        )
