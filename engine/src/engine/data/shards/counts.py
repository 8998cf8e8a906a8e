"""What a split knows of its shards before reading them: each one's sample count, labels and
known faults, from the manifest (engine/data/shards/manifest.py); local shards whose entry is
stale are read again (their entries kept under dataset.manifest_cache, not beside them),
remote ones must be listed, except `http(s)://` shards without a manifest:
those are counted and the result cached (engine/data/shards/tally.py). While streaming,
`counted` holds each shard to the count its manifest gives.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import BinaryIO

from engine.core.text import shown
from engine.data.shards import BUILD_HINT, ShardError
from engine.data.shards.manifest import (
    Manifest,
    default_location,
    load,
    load_beside,
    save_or_warn,
    scan,
)
from engine.data.shards.members import Record, Rules, read_records
from engine.data.shards.remote import Network
from engine.data.shards.sources import kind
from engine.data.shards.tally import (
    AGAIN,
    CACHE_KEY,
    cache_location,
    cached_record,
    sealed,
    tallied,
)
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
    if entry is None or rules.mismatch(entry) is not None:
        return False
    if kind(shard) != "local":
        return True
    stat = os.stat(shard)
    return (entry.get("size"), entry.get("mtime_ns")) == (stat.st_size, stat.st_mtime_ns)


def _reread(
    shards: list[str],
    stale: list[int],
    beside: str,
    rules: Rules,
    network: Network,
    cache_dir: str | None,
) -> dict[int, dict]:
    """The entries of the local `shards` (by position) that the manifest at `beside` does not
    hold fresh: from the reader's own record of that folder under `cache_dir`
    (dataset.manifest_cache), those not fresh there read again and the record rewritten. A
    reader never writes into the shards' folder: that is the data's, and mode=shards'."""
    cached = cache_location(cache_dir, os.path.abspath(beside)) if cache_dir else None
    record = Manifest(cached or "", None, {})
    if cached is not None:
        record = cached_record(cached, network, "reading again") or record
    found, read = {}, 0
    for i in stale:
        name = os.path.abspath(shards[i])  # outside the record's folder: named in full
        entry = record.entries.get(name)
        if not _fresh(entry, shards[i], rules):
            entry = record.entries[name] = sealed(scan(shards[i], rules, network))
            read += 1
        found[i] = entry
    if read:
        saved = cached is not None and save_or_warn(record, AGAIN, CACHE_KEY)
        if saved:
            where = f"kept in {shown(cached)}; next start reads it"
        else:
            where = f"not kept{' (dataset.manifest_cache is null)' * (cached is None)}: {AGAIN}"
        log.info(
            "read %d local shards (labels only) that %s does not list under these rules; %s",
            *(read, shown(beside), where),
        )
    return found


def shard_entries(
    shards: list[str],
    key: str,
    given: str | None,
    rules: Rules,
    network: Network,
    cache_dir: str | None = None,
    keep_going: bool = False,
) -> tuple[list[dict], Manifest]:
    """The manifest entry of every shard, and the manifest: `given` (dataset.manifest), else
    the one beside the first shard; local shards it does not hold fresh come from the reader's
    own record under `cache_dir` (`_reread`), remote ones must be listed, unless they are
    `http(s)://` shards with no manifest beside them: those are counted (`tallied`; a shard
    that cannot be read stops the count unless `keep_going`)."""
    for folder in dict.fromkeys(Path(s).parent for s in shards if kind(s) == "local"):
        unfinished = unfinished_write(folder)
        if unfinished is not None:
            raise ValueError(f"{key}: {unfinished}.")
    location = given or default_location(shards, key)
    if given is None and kind(location) == "http":
        manifest = load_beside(location, network) or tallied(
            shards, location, rules, network, cache_dir, keep_going
        )
    else:
        manifest = load(location, network)
    entries = [manifest.entry(shard) for shard in shards]
    stale = [i for i, entry in enumerate(entries) if not _fresh(entry, shards[i], rules)]
    for i in stale:
        if kind(shards[i]) != "local":
            raise ValueError(_unlisted(shards[i], key, manifest, entries[i], rules))
    if stale:
        for i, entry in _reread(shards, stale, location, rules, network, cache_dir).items():
            entries[i] = entry
    return entries, manifest  # type: ignore[return-value]


def _unlisted(shard: str, key: str, manifest: Manifest, entry: dict | None, rules: Rules) -> str:
    where = shown(manifest.location)
    if entry is None:
        problem = f"the manifest {where} does not list {shown(shard)}"
    else:
        problem = f"the manifest {where} does not hold for {shown(shard)}: {rules.mismatch(entry)}"
    return (
        f"{key}: {problem}; remote shards with a manifest are not read at start-up: write the "
        f"manifest with {BUILD_HINT} (or mode=shards) beside them, or set dataset.manifest."
    )
