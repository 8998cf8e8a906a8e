"""`dataset.train_shards` / `val_shards` expanded into a shard list, and each shard opened.

A value is one string or a list of them. Each string is brace-expanded as WebDataset does
(`train-{000000..000099}.tar`: the `braceexpand` package webdataset uses), then each name is
- a local path or glob (`data/shards/train-*.tar`), which must match at least one file;
- an `http://` or `https://` URL, read with retries that continue where a broken connection
  stopped (engine/data/shards/remote.py);
- `pipe:CMD`, the standard output of a shell command (`pipe:aws s3 cp s3://bucket/x.tar -`);
- any other `scheme://` URL (`s3://`, `gs://`, ...), opened with fsspec: the optional `remote`
  extra (`pip install -e '.[remote]'`) plus the scheme's own package (s3fs, gcsfs, ...).
Plain and gzip-compressed tars are told apart by their first bytes, not by their names.
"""

from __future__ import annotations

import glob
import io
import os
import re
from collections.abc import Sequence
from typing import BinaryIO

from braceexpand import UnbalancedBracesError, braceexpand

from engine.core.records import open_regular
from engine.core.text import shown
from engine.data.shards import ShardError
from engine.data.shards.openers import opener
from engine.data.shards.remote import Network, RetryingReader

BUFFER = 2**20  # bytes read from a shard at a time (tarfile asks for 10 KiB): -40 us per
# 60 KB sample over HTTP, -15 us from disk (client CPU, measured on the bench shards)
_SCHEME = re.compile(r"([A-Za-z][A-Za-z0-9+.-]*)://")
REMOTE_EXTRA = "pip install -e '.[remote]'"


def kind(name: str) -> str:
    """local, http, pipe or fsspec: how the shard `name` is opened."""
    if name.startswith("pipe:"):
        return "pipe"
    scheme = _SCHEME.match(name)
    if scheme is None:
        return "local"
    return "http" if scheme.group(1).lower() in ("http", "https") else "fsspec"


def check_fsspec(name: str, key: str) -> None:
    """Raise ImportError naming `key` (e.g. dataset.train_shards) when fsspec, or the package
    for the scheme of `name`, is not installed: before any worker tries to open the shard."""
    try:
        import fsspec
    except ImportError:
        raise ImportError(
            f"{key}: {shown(name)} is read through fsspec, which is not installed: {REMOTE_EXTRA}"
        ) from None
    scheme = _SCHEME.match(name).group(1)  # type: ignore[union-attr]
    try:
        fsspec.get_filesystem_class(scheme)
    except (ImportError, ValueError) as err:
        raise ImportError(
            f"{key}: {shown(name)}: fsspec cannot open {scheme}:// here ({err}); "
            f"install the package it names beside {REMOTE_EXTRA}"
        ) from None


def expand_shards(patterns: str | Sequence[str], key: str) -> list[str]:
    """The shard names `patterns` (the value of `key`, e.g. dataset.train_shards) stand for, in
    order. A shard named twice is refused: webdataset would read it twice (how its users
    upsample), while an epoch here reads each sample once, so either reading would surprise
    someone; dataset=mix's weights are the way to draw a set more often."""
    patterns = [patterns] if isinstance(patterns, str) else list(patterns)
    if not patterns:
        raise ValueError(f"{key}: an empty list; give a glob, brace pattern or URL.")
    shards: list[str] = []
    for pattern in map(str, patterns):
        try:
            names = list(braceexpand(pattern))
        except UnbalancedBracesError:
            raise ValueError(
                f"{key}: unbalanced braces in {pattern!r}; write ranges as "
                "train-{000000..000099}.tar."
            ) from None
        for name in names:
            if kind(name) == "fsspec":
                check_fsspec(name, key)
            if kind(name) != "local":
                shards.append(name)
                continue
            found = sorted(glob.glob(name))
            if not found:
                origin = f" (from {pattern!r})" if name != pattern else ""
                raise FileNotFoundError(
                    f"{key}: no tar shards match {name!r}{origin}; check the path and "
                    "the brace range."
                )
            shards += found
    return named_once(shards, key, patterns, "shard")


def named_once(names: list[str], key: str, patterns: object, what: str) -> list[str]:
    """`names` when none names a file twice, by its real path for a local one (`..` and links
    name one file); else one ValueError naming both spellings. The rule of both kinds read by
    file (tar shards, Parquet): webdataset and `datasets` would read such a file twice."""
    seen: dict[str, int] = {}
    for i, name in enumerate(names):
        j = seen.setdefault(os.path.realpath(name) if kind(name) == "local" else name, i)
        if j != i:
            first = names[j]
            spelled = f"as {shown(first)} and {shown(name)}, " if first != name else ""
            raise ValueError(
                f"{key}: {what} {shown(name)} is named twice ({spelled}patterns {patterns}); "
                f"an epoch reads each {what} once, so list it once, or draw a set more often "
                "with dataset=mix and a larger weight."
            )
    return names


def open_shard(name: str, network: Network, limit: int | None = None) -> BinaryIO:
    """A binary stream of the shard `name` from its first byte; a remote one is retried on
    network errors as `network` says, and may not be longer than `limit` bytes (its
    manifest's size: engine/data/shards/remote.py). A local one must be a regular file (a
    FIFO would block the open, a device never end)."""
    if kind(name) == "local":
        try:
            return open_regular(name, "a shard (a tar file)", BUFFER)
        except ValueError as err:
            raise ShardError(f"{shown(name)}: {err}.") from None
    reader = RetryingReader(name, opener(name, kind(name), network.timeout), network, limit)
    return io.BufferedReader(reader, BUFFER)  # type: ignore[return-value]
