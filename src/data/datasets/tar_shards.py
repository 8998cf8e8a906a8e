"""Streaming WebDataset-style tar shards (`KEY.jpg|png` + `KEY.cls`) as an IterableDataset."""

from __future__ import annotations

import glob
import logging
import random
import tarfile
import zlib
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import torch
from torch.utils.data import get_worker_info

from src.data.datasets.base import StreamDataset, Transform
from src.data.decode import IMAGE_SUFFIXES, SampleError, decode_image_bytes, describe_error
from src.data.image_header import PILLOW_MAX_PIXELS
from src.data.safe_read import max_file_bytes
from src.utils.text import shown

log = logging.getLogger(__name__)

Sample = tuple[str, bytes, int]  # (member name, encoded image, label)


def expand_shards(patterns: str | Sequence[str], key: str) -> list[str]:
    """Sorted shard paths matched by one glob pattern or a list of them."""
    patterns = [patterns] if isinstance(patterns, str) else list(patterns)
    shards = sorted({p for pattern in patterns for p in glob.glob(str(pattern))})
    if not shards:
        raise FileNotFoundError(f"dataset.{key}: no tar shards match {patterns}.")
    return shards


class ShardError(ValueError):
    """A shard that cannot be read as tar, or a member that breaks the sample rules."""


def parse_label(data: bytes, where: str) -> int:
    """The class index a `.cls` member holds (ASCII digits), or a `ShardError` naming it."""
    text = data.decode("utf-8", "replace").strip()
    if not (text.isascii() and text.isdigit()):
        raise ShardError(
            f"{where}: a .cls member must hold a class index (0, 1, ...), not {text[:40]!r}; "
            "write the index of the class in dataset.classes_file instead of its name."
        )
    return int(text)


@contextmanager
def _reading(path: str, members: list[str]) -> Iterator[None]:
    """Turn a broken tar stream into one `ShardError` naming the shard and the last member."""
    try:
        yield
    except (tarfile.TarError, EOFError, zlib.error, OSError) as err:
        after = f" after member {shown(members[-1])}" if members else " before its first member"
        raise ShardError(
            f"{shown(path)}: not a readable tar shard{after} ({type(err).__name__}: "
            f"{str(err) or 'no detail'}); the file is truncated or corrupt: copy or write it again."
        ) from err


def read_shard(path: str, max_member_bytes: int | None = None) -> Iterator[Sample]:
    """One shard's samples in stored order, named `SHARD::MEMBER` (KEY needs image + `.cls`);
    a member larger than `max_member_bytes` is refused before it is read."""
    images: dict[str, tuple[str, bytes]] = {}
    labels: dict[str, int] = {}
    seen: list[str] = []
    with _reading(path, seen), tarfile.open(path, mode="r|") as tar:
        for member in tar:
            seen.append(member.name)
            if not member.isfile():
                continue
            head, _, base = member.name.rpartition("/")
            stem, _, suffix = base.partition(".")
            key = f"{head}/{stem}"
            if max_member_bytes is not None and member.size > max_member_bytes:
                raise ShardError(
                    f"{shown(path)}::{shown(member.name)}: {member.size:,} bytes, more than an "
                    f"image within dataset.max_image_pixels can take ({max_member_bytes:,} bytes)."
                )
            data = tar.extractfile(member).read()  # type: ignore[union-attr]
            if suffix == "cls":
                labels[key] = parse_label(data, f"{shown(path)}::{shown(member.name)}")
            elif f".{suffix.lower()}" in IMAGE_SUFFIXES:
                images[key] = (f"{shown(path)}::{shown(member.name)}", data)
            if key in labels and key in images:
                name, image = images.pop(key)
                yield name, image, labels.pop(key)
    if images or labels:
        raise ShardError(
            f"{shown(path)}: samples without both an image and a .cls: "
            f"{[shown(key) for key in sorted({*images, *labels})[:5]]}"
        )


def shard_labels(path: str) -> list[int]:
    """The `.cls` labels of one shard in stored order, reading only those small members.
    The whole file must be tar: Python's tarfile ends an archive quietly at a damaged header,
    which would drop every sample after it, so data past the last member is an error."""
    seen: list[str] = []
    labels = []
    with _reading(path, seen), tarfile.open(path, mode="r:") as tar:
        for member in tar:
            seen.append(member.name)
            if member.isfile() and member.name.endswith(".cls"):
                data = tar.extractfile(member).read()  # type: ignore[union-attr]
                labels.append(parse_label(data, f"{shown(path)}::{shown(member.name)}"))
        end = tar.offset
    with open(path, "rb") as f:
        f.seek(end)
        while chunk := f.read(2**20):
            if chunk.strip(b"\0"):
                after = f"member {shown(seen[-1])}" if seen else "the start"
                raise ShardError(
                    f"{shown(path)}: a damaged tar header at byte {end} (after {after}); the "
                    "samples after it cannot be read: copy or write the shard again."
                )
    if not labels:
        raise ShardError(f"{shown(path)}: no samples (no .cls members) in this shard.")
    return labels


def shuffle_buffer(samples: Iterator[Sample], size: int, rng: random.Random) -> Iterator[Sample]:
    """Approximate shuffle of a stream: yield a random element of a buffer of `size` items."""
    buffer: list[Sample] = []
    for sample in samples:
        buffer.append(sample)
        if len(buffer) >= size:
            i = rng.randrange(len(buffer))
            buffer[i], buffer[-1] = buffer[-1], buffer[i]
            yield buffer.pop()
    rng.shuffle(buffer)
    yield from buffer


class TarShardDataset(StreamDataset):
    """One split of tar shards, split across ranks (`distribute`), then across each rank's
    DataLoader workers, so each sample is read once per epoch in the whole job.

    With `shuffle`, each rank's shard order is reshuffled every epoch (same order in every
    worker, so the split stays exact) and samples pass through a `shuffle_buffer` per worker.
    """

    def __init__(
        self,
        split: str,
        train_shards: str | Sequence[str],
        val_shards: str | Sequence[str],
        shuffle_buffer: int = 1000,
        seed: int = 0,
        classes_file: str | None = None,
        max_image_pixels: int | None = PILLOW_MAX_PIXELS,
        transform: Transform | None = None,
        classes: Sequence[str] | None = None,
    ) -> None:
        key = f"{split}_shards"
        self.shards = expand_shards(train_shards if split == "train" else val_shards, key)
        self.split = split
        self.shuffle = split == "train"
        self.shuffle_buffer = shuffle_buffer
        self.seed = seed
        self.transform = transform
        self.max_image_pixels = max_image_pixels
        labels = [shard_labels(shard) for shard in self.shards]
        self.shard_sizes = [len(shard) for shard in labels]
        self.targets = np.array([label for shard in labels for label in shard])
        self.rank, self.world_size = 0, 1
        if classes is None:
            classes = self._read_classes(classes_file) or [
                str(i) for i in range(int(self.targets.max()) + 1)
            ]
        self.classes = list(classes)
        if int(self.targets.max()) >= len(self.classes) or int(self.targets.min()) < 0:
            raise ValueError(
                f"dataset.{key}: labels span {self.targets.min()}..{self.targets.max()} but "
                f"there are {len(self.classes)} classes; check dataset.classes_file."
            )
        self._epoch = 0
        self._iterations_since_set = 0

    def _read_classes(self, classes_file: str | None) -> list[str] | None:
        path = Path(classes_file) if classes_file else Path(self.shards[0]).parent / "classes.txt"
        if not path.is_file():
            if classes_file:
                raise FileNotFoundError(f"dataset.classes_file: {path} does not exist.")
            return None
        return [line.strip() for line in path.read_text().splitlines() if line.strip()]

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
        same number on every rank, so all ranks plan the same learning-rate schedule."""
        w = self.world_size
        return max(sum(self.shard_sizes[r::w]) for r in range(w))

    def set_epoch(self, epoch: int) -> None:
        """Seed the next pass; persistent workers keep counting passes on their own copy."""
        self._epoch, self._iterations_since_set = epoch, 0

    def __iter__(self) -> Iterator[tuple[torch.Tensor, int]]:
        epoch = self._epoch + self._iterations_since_set
        self._iterations_since_set += 1
        info = get_worker_info()
        worker, workers = (info.id, info.num_workers) if info is not None else (0, 1)
        shards = self.local_shards
        if self.shuffle:
            random.Random(f"{self.seed}-{epoch}").shuffle(shards)
        limit = max_file_bytes(self.max_image_pixels)
        samples = (s for shard in shards[worker::workers] for s in read_shard(shard, limit))
        if self.shuffle and self.shuffle_buffer > 1:
            rng = random.Random(f"{self.seed}-{epoch}-{self.rank}-{worker}")
            samples = shuffle_buffer(samples, self.shuffle_buffer, rng)
        for name, data, label in samples:
            try:
                image = decode_image_bytes(data, name, max_pixels=self.max_image_pixels)
            except Exception as err:
                raise SampleError(
                    f"cannot decode {name} (class {self.classes[label]!r}) from "
                    f"dataset.{self.split}_shards: {describe_error(err)}. Fix or remove that "
                    "member and write the shard again."
                ) from err
            yield (self.transform(image) if self.transform else image), label
