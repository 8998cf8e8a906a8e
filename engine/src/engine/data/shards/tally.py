"""`http(s)://` shards with no manifest beside them, counted once at start-up and cached.

Shards written by webdataset's ShardWriter and put on a web server rarely come with a
`shards.json`. Then the server is asked for each shard's size and version (a HEAD request:
Content-Length, ETag, Last-Modified), and every shard the local cache does not hold with those
is read once, end to end (labels only, no image decoded), by the reader a stream uses: every
guard of a stream holds (the rate floor, tar header caps, label checks), and the read may not
pass the Content-Length, so an endless body ends. THREADS shards are read at a time, with a
progress line every PROGRESS_S seconds. Their entries (engine/data/shards/manifest.py, the
server's size and version included) are kept under `dataset.manifest_cache`, one file per
server folder: the next start asks only for the HEADs, and counts again the shards whose size
or version changed.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import time
import urllib.parse
from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait

from engine.core.text import shown
from engine.data.shards import ShardError
from engine.data.shards.manifest import Manifest, load, save_or_warn, scan
from engine.data.shards.members import Rules
from engine.data.shards.openers import http_version
from engine.data.shards.remote import Network, retried
from engine.data.shards.sources import kind

log = logging.getLogger(__name__)

THREADS = 8  # shards counted at once (the network's wait, not the CPU, bounds a count)
HEADS = 32  # HEAD requests at once (each is one round trip: latency alone)
PROGRESS_S = 5.0  # seconds between progress lines while shards are counted
VERSION_KEYS = ("size", "etag", "last_modified")  # what a changed shard changes
NEW = "not counted yet"
CACHE_KEY = "dataset.manifest_cache"
AGAIN = "every start counts them again"
DIGEST = "digest"  # the key of an entry's digest in the reader's own record


def cache_location(cache_dir: str, beside: str) -> str:
    """The cached manifest of shards whose own manifest would be at `beside` (a URL, or a
    local path: engine/data/shards/counts.py): a file in `cache_dir` named by the server
    (`local`) and a hash of that location. A `cache_dir` that exists and is no folder is
    refused in one line (it cannot hold the file, and reading under it fails oddly)."""
    if os.path.exists(cache_dir) and not os.path.isdir(cache_dir):
        raise ValueError(
            f"dataset.manifest_cache={shown(cache_dir)} is a file, not a folder: point it at a "
            "folder (made when missing), or set it to null to count the shards at every start."
        )
    server = urllib.parse.urlsplit(beside).netloc if kind(beside) != "local" else "local"
    host = re.sub(r"[^A-Za-z0-9.-]+", "_", server)[:64]
    digest = hashlib.sha256(beside.encode()).hexdigest()[:16]
    return os.path.join(cache_dir, f"{host}-{digest}.json")


def versions(urls: list[str], network: Network) -> dict[str, dict]:
    """Each shard's size and version as its server says (HEAD), HEADS at a time."""

    def head(url: str) -> dict:
        return retried(url, "HEAD", network, lambda: http_version(url, network.timeout))

    with ThreadPoolExecutor(min(HEADS, len(urls))) as pool:
        return dict(zip(urls, pool.map(head, urls), strict=True))


def change(entry: dict | None, version: dict, rules: Rules) -> str | None:
    """Why a shard's cached `entry` does not hold for the shard the server has now (its
    `version`), or None when it does."""
    if entry is None:
        return NEW
    mismatch = rules.mismatch(entry)
    if mismatch is not None:
        return mismatch
    for key in VERSION_KEYS:
        if entry.get(key) != version.get(key):
            return f"its {key} was {entry.get(key)!r}, now {version.get(key)!r}"
    return None


def count(
    shards: dict[str, dict], rules: Rules, network: Network, stop_at_error: bool, where: str
) -> dict[str, dict]:
    """The manifest entries of `shards` (URL -> its version), each read once, their version
    included; a shard that cannot be read has an `error`, and with `stop_at_error` the first
    such ends the count (shards not yet started are left out)."""
    total = sum(version["size"] for version in shards.values())
    entries: dict[str, dict] = {}
    pool = ThreadPoolExecutor(min(THREADS, len(shards)))
    pending = {
        pool.submit(scan, url, rules, network, version["size"]): url
        for url, version in shards.items()
    }
    start = shown_at = time.monotonic()
    read = samples = 0
    try:
        while pending:
            done, _ = wait(pending, PROGRESS_S, FIRST_COMPLETED)
            for future in done:
                url = pending.pop(future)
                entries[url] = entry = future.result() | shards[url]
                read, samples = read + shards[url]["size"], samples + entry["samples"]
                if stop_at_error and "error" in entry:
                    return entries
            now = time.monotonic()
            if pending and now - shown_at >= PROGRESS_S:
                shown_at = now
                eta = f"{(now - start) * (total - read) / read:.0f} s" if read else "unknown"
                log.info(
                    "counting the shards of %s: %d/%d counted, %s samples so far, %s of %s "
                    "bytes, ETA %s",
                    where,
                    len(entries),
                    len(shards),
                    f"{samples:,}",
                    f"{read:,}",
                    f"{total:,}",
                    eta,
                )
    finally:
        pool.shutdown(wait=False, cancel_futures=True)  # the running reads end on their own
    return entries


def _digest(entry: dict) -> str:
    """The digest of a counted entry (its DIGEST key aside)."""
    body = {key: value for key, value in entry.items() if key != DIGEST}
    return hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()[:16]


def sealed(entry: dict) -> dict:
    """`entry` as the reader's own record keeps it: with its digest, so `cached_record` can
    tell an entry changed since it was counted."""
    return {**entry, DIGEST: _digest(entry)}


def cached_record(cached: str, network: Network, again: str) -> Manifest | None:
    """The reader's own record at `cached` (under dataset.manifest_cache), read as hostile
    input: unreadable, or holding class names (which no count writes: not this project's
    file, and they would rename the model's classes), it is None with a warning. An entry
    whose digest does not fit (edited: a label of 99 made a 100-class model that failed
    mid-read, naming only the shard) is dropped with a warning, so its shard is read again."""
    try:
        record = load(cached, network)
    except ValueError as err:
        log.warning("the manifest cache %s is unreadable (%s): %s", cached, err, again)
        return None
    if record.classes is not None:
        log.warning(
            "the manifest cache %s holds class names, which a count never writes (it is not "
            "this project's record): %s",
            cached,
            again,
        )
        return None
    changed = [
        name for name, entry in record.entries.items() if entry.get(DIGEST) != _digest(entry)
    ]
    if changed:
        log.warning(
            "the manifest cache %s holds %d entries that changed since they were counted "
            "(%s, ...: edited, or written by an older engine): %s",
            cached,
            len(changed),
            shown(changed[0]),
            again,
        )
        for name in changed:
            del record.entries[name]
    return record


def tallied(
    shards: list[str],
    beside: str,
    rules: Rules,
    network: Network,
    cache_dir: str | None,
    keep_going: bool,
) -> Manifest:
    """The manifest of the `http(s)://` ones of `shards`, whose server has none at `beside`:
    the one cached in `cache_dir`, with the shards that changed on the server (or were not
    counted yet) counted again and the cache rewritten; a shard that cannot be read is a
    ShardError after the others are cached, unless `keep_going` (its entry then has the
    `error`, and is not cached: a read that broke off may succeed next time)."""
    where = beside.rpartition("/")[0] + "/"
    cached = cache_location(cache_dir, beside) if cache_dir else None
    manifest = Manifest(cached or beside, None, {})
    if cached is not None:
        manifest = cached_record(cached, network, "counting again") or manifest
    urls = [shard for shard in shards if kind(shard) == "http"]
    found = versions(urls, network)
    why = {url: change(manifest.entry(url), v, rules) for url, v in found.items()}
    stale = {url: found[url] for url, reason in why.items() if reason is not None}
    if not stale:
        log.info(
            "read the counts of %d shards of %s from %s (their sizes and versions unchanged)",
            len(urls),
            where,
            cached,
        )
        return manifest
    first = next((url for url in stale if why[url] != NEW), None)
    if first is None:
        log.info(
            "no shard manifest at %s: counting %d shards once, %d at a time",
            shown(beside),
            len(stale),
            min(THREADS, len(stale)),
        )
    else:
        log.info(
            "%d of %d shards changed since they were counted (%s: %s): counting them again",
            len(stale),
            len(urls),
            shown(first),
            why[first],
        )
    counted = count(stale, rules, network, not keep_going, where)
    good = {url: entry for url, entry in counted.items() if "error" not in entry}
    for url, entry in good.items():
        manifest.entries[manifest.name_of(url)] = sealed(entry)
    saved = bool(good) and cached is not None and save_or_warn(manifest, AGAIN, CACHE_KEY)
    failed = [entry["error"] for entry in counted.values() if "error" in entry]
    if failed and not keep_going:
        raise ShardError(shown(failed[0]))
    samples = f"{sum(entry['samples'] for entry in counted.values()):,}"
    if saved:
        cache = f"cached the manifest in {shown(manifest.location)}; next start reads it"
    elif cached is None:
        cache = f"not cached (dataset.manifest_cache is null): {AGAIN}"
    else:
        cache = f"not cached: {AGAIN}"
    log.info("counted %d shards (%s samples) from %s; %s", len(counted), samples, where, cache)
    for url, entry in counted.items():  # the failed ones too, for this run only
        manifest.entries[manifest.name_of(url)] = entry
    return manifest
