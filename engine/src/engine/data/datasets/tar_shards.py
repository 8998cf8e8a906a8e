"""Streaming WebDataset tar shards, local or remote, as an IterableDataset.

Shards come from paths, globs, brace patterns, URLs, `pipe:` commands or fsspec
(engine/data/shards/sources.py), their samples follow WebDataset's member rules
(engine/data/shards/members.py), and their sample counts and labels come from the manifest
(engine/data/shards/manifest.py), so start-up reads no remote shard; `http(s)://` shards with
no manifest are counted once instead, and local shards it does not list (under these member
rules) read once, each kept in `manifest_cache` (engine/data/shards/tally.py, counts.py; None:
read at every start), never written beside the shards. With `on_error=skip`, samples that
cannot be read (and with `skip_bad_shards`, the rest of a shard that cannot) become
`BadSample` records the loader lists in bad_samples.csv (engine/data/bad_samples.py).
"""

from __future__ import annotations

import logging
import random
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TypeVar

import numpy as np
import torch
from torch.utils.data import get_worker_info

from engine.core.bounds import Count, Seconds, Timeout
from engine.core.seeding import derive_seed
from engine.core.text import shown
from engine.data.bad_samples import BadSample
from engine.data.datasets.base import DecodedSamples, StreamDataset, Transform
from engine.data.decode import SampleError, decode_image_bytes, describe_error
from engine.data.decode_policy import DecodePolicy
from engine.data.listing import unique_classes
from engine.data.safe_read import max_file_bytes
from engine.data.sample_ids import Tagged
from engine.data.shards import ShardError
from engine.data.shards.counts import counted, shard_entries
from engine.data.shards.members import Record, Rules, split_exts
from engine.data.shards.remote import Network
from engine.data.shards.sources import expand_shards, kind, open_shard
from engine.measure.stages import SUMS

__all__ = ["ShardError", "TarShardDataset", "shuffle_buffer"]

log = logging.getLogger(__name__)

Item = tuple[int, Record] | BadSample  # (index in the split, record), or a lost shard's rest


def shuffle_buffer(samples: Iterator[Item], size: int, rng: random.Random) -> Iterator[Item]:
    """Approximate shuffle of a stream: yield a random element of a buffer of `size` items."""
    buffer: list[Item] = []
    for sample in samples:
        buffer.append(sample)
        if len(buffer) >= size:
            i = rng.randrange(len(buffer))
            buffer[i], buffer[-1] = buffer[-1], buffer[i]
            yield buffer.pop()
    rng.shuffle(buffer)
    yield from buffer


class TarShardDataset(DecodedSamples, StreamDataset):
    """One split of tar shards, split across ranks (`distribute`), then across each rank's
    DataLoader workers, so each sample is read once per epoch in the whole job.

    With `shuffle`, each rank's shard order is reshuffled every epoch (same order in every
    worker, so the split stays exact) and samples pass through a `shuffle_buffer` per worker.
    A sample's random transform is seeded by (seed, epoch, its index in the split), so a run
    resumed mid-epoch (which replays the epoch's first batches) draws the same augmentations.
    A run resumed on another topology calls `resume_without` instead: that epoch's pass leaves
    out the samples the interrupted run trained on (engine/runs/stream_resume.py).
    """

    def __init__(
        self,
        split: str,
        train_shards: str | Sequence[str],
        val_shards: str | Sequence[str],
        shuffle_buffer: Count = 1000,
        seed: int = 0,
        classes_file: str | None = None,
        transform: Transform | None = None,
        classes: Sequence[str] | None = None,
        manifest: str | None = None,
        manifest_cache: str | None = None,
        image_exts: str = "jpg;jpeg;png;webp",
        label_field: str | None = None,
        ignore_exts: str | None = None,
        retries: Count = 3,
        backoff: Seconds = 1.0,
        read_timeout: Timeout = 60.0,
        decode: DecodePolicy | None = None,
        skip_bad_shards: bool = False,
    ) -> None:
        decode = (decode or DecodePolicy()).only_in_workers("iterable")
        self.on_error, self.max_bad_fraction = decode.on_error, decode.max_bad_fraction
        max_image_pixels = decode.max_image_pixels
        self.skip_bad_shards = skip_bad_shards and decode.on_error == "skip"
        key = f"dataset.{split}_shards"
        self.shards = expand_shards(train_shards if split == "train" else val_shards, key)
        self.split = split
        self.shuffle = split == "train"
        self.shuffle_buffer = shuffle_buffer
        self.seed = seed
        self.transform = transform
        self.max_image_pixels, self.max_jpeg_scans = max_image_pixels, decode.max_jpeg_scans
        self.network = Network(retries, backoff, read_timeout)
        self.rules = Rules(
            split_exts(image_exts, "dataset.image_exts"),
            label_field,
            split_exts(ignore_exts, "dataset.ignore_exts"),
            max_file_bytes(max_image_pixels),
        )
        entries, found = shard_entries(
            self.shards,
            key,
            manifest,
            self.rules,
            self.network,
            cache_dir=manifest_cache,
            keep_going=self.skip_bad_shards,
        )
        location, listed = found.location, found.classes
        for entry in entries:  # faults the manifest knows of stop the run here, unless skipped
            if entry["errors"] and self.on_error == "raise":
                raise ShardError(shown(entry["errors"][0][1]))
            if "error" in entry and not self.skip_bad_shards:
                raise ShardError(shown(entry["error"]))
        self.shard_sizes = [entry["samples"] for entry in entries]
        self.shard_bytes = [entry.get("size") for entry in entries]  # remote: an upper bound
        self.starts = np.cumsum([0, *self.shard_sizes[:-1]]).tolist()
        labels = np.array([label for entry in entries for label in entry["labels"]], np.int64)
        self.shard_labels = [
            labels[a : a + n] for a, n in zip(self.starts, self.shard_sizes, strict=True)
        ]
        self.targets = labels[labels >= 0]
        if not len(self.targets):
            raise ShardError(
                f"{key}: no readable samples in {len(self.shards)} shards ({shown(self.shards[0])}"
                f"{', ...' if len(self.shards) > 1 else ''}) as their manifest {shown(location)} "
                "lists them; check the shards, dataset.image_exts / label_field, and the manifest "
                "(delete it beside local shards to have it written again)."
            )
        self.rank, self.world_size = 0, 1
        if classes is None:
            classes = self._read_classes(classes_file) or listed
        self.classes = list(classes or (str(i) for i in range(int(self.targets.max()) + 1)))
        if int(self.targets.max()) >= len(self.classes):
            at = int(np.flatnonzero(labels >= len(self.classes))[0])
            shard = int(np.searchsorted(self.starts, at, side="right")) - 1
            raise ValueError(
                f"{key}: sample {at - self.starts[shard]} of {shown(self.shards[shard])} has "
                f"label {labels[at]} in the manifest {shown(location)}, but there are "
                f"{len(self.classes)} classes; check dataset.classes_file and the shard."
            )
        self._epoch = 0
        self._iterations_since_set = 0
        self._left_out: tuple[int, np.ndarray] | None = None  # (epoch, its trained samples)

    def _read_classes(self, classes_file: str | None) -> list[str] | None:
        """The class list of `classes_file`, or of classes.txt beside local shards (None:
        neither): one name per line, blank lines skipped, spaces at a name's ends taken off;
        each name checked as every class list is (listing.unique_classes: NFC, no control or
        format character, each once) in one line naming the file and line. An empty file is
        refused: it would number the classes '0'..'K-1' without a word."""
        first = self.shards[0]
        beside = Path(first).parent / "classes.txt" if kind(first) == "local" else None
        path = Path(classes_file) if classes_file else beside
        if path is None or not path.is_file():
            if classes_file:
                raise FileNotFoundError(f"dataset.classes_file: {path} does not exist.")
            return None
        key = "dataset.classes_file" if classes_file else "classes.txt beside the shards"
        try:
            text = path.read_text(encoding="utf-8-sig")  # -sig: a BOM is no part of a name
        except UnicodeDecodeError as err:
            raise ValueError(
                f"{key}: {path} is not UTF-8 text ({err.reason}); save it as UTF-8."
            ) from None
        # split on \n only: str.splitlines also splits on \x1c, \x85, U+2028, ..., which would
        # make one name two rather than refuse it
        lines = [
            (number, line.removesuffix("\r")) for number, line in enumerate(text.split("\n"), 1)
        ]
        named = [(number, line) for number, line in lines if line.strip(" ")]
        if not named:
            instead = "set it to null" if classes_file else "delete it"
            raise ValueError(
                f"{key}: {path} lists no class names: write one name per line, in the order of "
                f"the shards' integer labels, or {instead} to take the names from the shards."
            )
        return unique_classes(
            [line.strip(" ") for _, line in named], key, at=lambda i: f"{path}:{named[i][0]}"
        )

    def distribute(self, rank: int, world_size: int) -> None:
        """Read only this rank's shards: every `world_size`-th one from `rank`."""
        if not 0 <= rank < world_size:
            raise ValueError(f"rank {rank} is outside a world of {world_size} processes")
        self.rank, self.world_size = rank, world_size

    @property
    def local_shards(self) -> list[str]:
        """The shards this rank reads (all of them in a single process)."""
        return self.shards[self.rank :: self.world_size]

    def __len__(self) -> int:
        """Samples per epoch of the longest rank's share (all samples in a single process): the
        same number on every rank, so all ranks plan the same learning-rate schedule. In the
        pass `resume_without` shortened, the longest rank's share of the samples left."""
        w, (shards, left) = self.world_size, self._plan(self._epoch)
        return max(sum(left[s] for s in shards[r::w]) for r in range(w))

    def resume_without(self, epoch: int, trained: np.ndarray) -> None:
        """Leave the split's samples `trained` (a bool per index; past its end: not trained)
        out of the pass of `epoch`: shards wholly trained on are not opened, and the rest are
        split over the ranks and workers as if they were the whole split. Later epochs are
        whole again."""
        total = sum(self.shard_sizes)
        if len(trained) > total:
            raise ValueError(
                f"trainer.resume: the checkpoint's epoch {epoch} trained on samples of a split "
                f"of {len(trained)}, dataset.{self.split}_shards has {total}: resume with the "
                "shards it was trained on, or from a checkpoint saved at an epoch's end."
            )
        self._left_out = (epoch, np.pad(np.asarray(trained, bool), (0, total - len(trained))))

    def _plan(self, epoch: int) -> tuple[list[int], list[int]]:
        """The shards the pass of `epoch` reads (before the rank split) and each shard's number
        of samples to read."""
        if self._left_out is None or self._left_out[0] != epoch:
            return list(range(len(self.shards))), list(self.shard_sizes)
        trained = self._left_out[1]
        left = [
            n - int(trained[a : a + n].sum())
            for a, n in zip(self.starts, self.shard_sizes, strict=True)
        ]
        return [s for s, n in enumerate(left) if n], left

    def set_epoch(self, epoch: int) -> None:
        """Seed the next pass; persistent workers keep counting passes on their own copy."""
        self._epoch, self._iterations_since_set = epoch, 0

    def _read(self, shard: int) -> Iterator[Item]:
        """Shard number `shard`'s records with their index in the split; with skip_bad_shards
        a shard that fails gives one `BadSample` for the samples it had left."""
        name, expected, done = self.shards[shard], self.shard_sizes[shard], 0
        try:
            with open_shard(name, self.network, self.shard_bytes[shard]) as stream:
                for record in counted(stream, name, self.rules, expected, self.shard_labels[shard]):
                    yield self.starts[shard] + done, record
                    done += 1
        except ShardError as err:
            if not self.skip_bad_shards:
                raise
            lost = max(1, expected - done)
            error = f"{lost} samples left out: {str(err).removeprefix(f'{shown(name)}: ')}"
            yield BadSample(self.starts[shard] + done, name, "", error, lost)

    def __iter__(self) -> Iterator[tuple[torch.Tensor, int] | BadSample]:
        epoch = self._epoch + self._iterations_since_set
        self._iterations_since_set += 1
        info = get_worker_info()
        worker, workers = (info.id, info.num_workers) if info is not None else (0, 1)
        shards = self._plan(epoch)[0][self.rank :: self.world_size]
        if self.shuffle:
            random.Random(f"{self.seed}-{epoch}").shuffle(shards)
        items = (item for shard in shards[worker::workers] for item in self._read(shard))
        if self._left_out is not None and self._left_out[0] == epoch:
            trained = self._left_out[1]
            items = (i for i in items if isinstance(i, BadSample) or not trained[i[0]])
        if self.shuffle and self.shuffle_buffer > 1:
            rng = random.Random(f"{self.seed}-{epoch}-{self.rank}-{worker}")
            items = shuffle_buffer(items, self.shuffle_buffer, rng)
        for item in _timed_reads(items):
            if isinstance(item, BadSample):
                yield item
                continue
            sample = self._sample(*item, epoch)
            tag = self.tags_samples and not isinstance(sample, BadSample)
            yield Tagged(sample, item[0]) if tag else sample

    def _transformed(self, image: torch.Tensor, index: int, epoch: int) -> torch.Tensor:
        """The transform under torch's generator seeded from (seed, epoch, index), as for
        map-style data (engine/data/seeded.py): a resumed run's replay draws the same crops."""
        if self.transform is None:
            return image
        with torch.random.fork_rng(devices=[]):
            torch.default_generator.manual_seed(derive_seed(self.seed, epoch, index))
            return self.transform(image)

    def _decode(self, name: str, data: bytes | None, label: int) -> torch.Tensor:
        """Member `name`'s image; a `SampleError` naming it and the fix if it cannot be read."""
        try:
            with SUMS.timed("decode"):  # the pipeline's stages (engine/measure/stages.py)
                limits = self.max_image_pixels, self.max_jpeg_scans
                return decode_image_bytes(data, name, None, *limits)  # type: ignore[arg-type]
        except Exception as err:
            raise SampleError(
                f"cannot decode {name} (class {self.classes[label]!r}) from "
                f"dataset.{self.split}_shards: {describe_error(err)}. Fix or remove that member "
                "and write the shard again, or set dataset.decode.on_error=skip to leave it out."
            ) from err

    def _sample(
        self, index: int, record: Record, epoch: int
    ) -> tuple[torch.Tensor, int] | BadSample:
        """The decoded, transformed sample of `record`, or (on_error=skip) its `BadSample`."""
        name, data, label, error = record
        if error is None and not label < len(self.classes):
            error = f"{name}: label {label} is outside the {len(self.classes)} classes."
        if error is not None:
            reason = error.removeprefix(f"{name}: ")
            return self._skip_or_raise(index, ShardError(error), path=name, label="", reason=reason)
        try:
            image = self._decode(name, data, label)
        except SampleError as err:
            return self._skip_or_raise(index, err, path=name, label=self.classes[label])
        return self._transformed(image, index, epoch), label


T = TypeVar("T")
_END = object()  # the end of a stream of items


def _timed_reads(items: Iterator[T]) -> Iterator[T]:
    """`items`, the time each takes to come (the shard's bytes, through the shuffle buffer)
    counted as the pipeline's `read` stage."""
    it = iter(items)
    while True:
        with SUMS.timed("read"):
            item = next(it, _END)
        if item is _END:
            return
        yield item  # type: ignore[misc]
