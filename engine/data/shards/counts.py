"""What a split knows of its shards before reading them: each one's sample count, labels and
known faults, from the manifest (engine/data/shards/manifest.py); local shards whose entry is
stale are read again, remote ones must be listed. While streaming, `counted` holds each shard
to the count its manifest gives.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import BinaryIO

from engine.core.text import shown
from engine.data.shards import ShardError
from engine.data.shards.manifest import BUILD_HINT, Manifest, default_location, load, scan
from engine.data.shards.members import Record, Rules, read_records
from engine.data.shards.remote import Network
from engine.data.shards.sources import kind
from engine.data.shards.writer import unfinished_write

log = logging.getLogger(__name__)


def counted(
    stream: BinaryIO, shard: str, rules: Rules, expected: int, labels: Sequence[int]
) -> Iterator[Record]:
    """The records of `shard`; more or fewer than the `expected` its manifest lists, or a
    label other than its manifest's `labels`, is a `ShardError` (the shard changed after the
    manifest was written, or a server sent other bytes)."""
    count = 0
    for record in read_records(stream, shard, rules):
        count += 1
        if count > expected:
            break
        if record.label != labels[count - 1]:
            raise ShardError(
                f"{shown(shard)}: sample {count - 1} has label {record.label} where its manifest "
                f"lists {labels[count - 1]}: the shard changed after the manifest was written; "
                f"write it again ({BUILD_HINT}, or delete it beside local shards)."
            )
        yield record
    if count != expected:
        more = "more" if count > expected else f"only {count}"
        raise ShardError(
            f"{shown(shard)}: {more} samples where its manifest lists {expected}: the shard "
            f"changed after the manifest was written; write it again ({BUILD_HINT}, or delete "
            "it beside local shards)."
        )


def _fresh(entry: dict | None, shard: str, rules: Rules) -> bool:
    if entry is None or entry.get("label_from") != rules.label_from:
        return False
    if kind(shard) != "local":
        return True
    stat = os.stat(shard)
    return (entry.get("size"), entry.get("mtime_ns")) == (stat.st_size, stat.st_mtime_ns)


def shard_entries(
    shards: list[str], key: str, location: str | None, rules: Rules, network: Network
) -> tuple[list[dict], list[str] | None]:
    """The manifest entry of every shard and the manifest's classes: local shards read again
    when stale (the manifest rewritten when local), remote ones must be listed."""
    for folder in dict.fromkeys(Path(s).parent for s in shards if kind(s) == "local"):
        unfinished = unfinished_write(folder)
        if unfinished is not None:
            raise ValueError(f"{key}: {unfinished}.")
    manifest = load(location or default_location(shards, key), network)
    entries, changed = [], False
    for shard in shards:
        entry = manifest.entry(shard)
        if not _fresh(entry, shard, rules):
            if kind(shard) != "local":
                raise ValueError(_unlisted(shard, key, manifest, entry, rules))
            entry = manifest.entries[manifest.name_of(shard)] = scan(shard, rules, network)
            changed = True
        entries.append(entry)
    if changed and kind(manifest.location) == "local":
        try:
            manifest.save()
        except OSError as err:
            where = shown(manifest.location)
            log.warning(
                "cannot write the shard manifest %s (%s): the shards are read again at every "
                "start; set dataset.manifest to a writable file.",
                where,
                err,
            )
    return entries, manifest.classes


def _unlisted(shard: str, key: str, manifest: Manifest, entry: dict | None, rules: Rules) -> str:
    where = shown(manifest.location)
    if entry is None:
        problem = f"the manifest {where} does not list {shown(shard)}"
    else:
        problem = (
            f"the manifest {where} has labels from {entry.get('label_from')} for {shown(shard)}, "
            f"dataset.label_field asks for {rules.label_from}"
        )
    return (
        f"{key}: {problem}; remote shards are not read at start-up: write the manifest with "
        f"{BUILD_HINT} (or mode=shards) beside them, or set dataset.manifest."
    )
