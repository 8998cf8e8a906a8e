"""The shard manifest: how many samples each shard holds and their labels, read once.

`shards.json` beside the shards (or where `dataset.manifest` says) holds

    {"format": "tar-shards", "version": 1,
     "classes": ["circle", "cross"],       # optional: class names (mode=shards writes them)
     "shards": {"train-000000.tar": {      # name relative to the manifest's folder, else as given
         "samples": 256,                   # samples (keys) in the shard, in stored order
         "labels": [3, 0, -1, ...],        # their class indices; -1: a sample that breaks the rules
         "label_from": "cls",              # where labels were read: cls, or json:FIELD
         "rules": {"image_exts": ["jpg", ...], "ignore_exts": [], "max_member_bytes": null},
                                           # the other member rules it was read under
         "errors": [[2, "SHARD::MEMBER: why"]],  # those samples: position in the shard, reason
         "error": "SHARD: why",            # optional: the shard is not readable past `samples`
         "size": 1290240, "mtime_ns": 1764514000000000000,  # local shards: file size, mtime
         "etag": "\"5f3-1290240\"", "last_modified": "..."}}}  # counted URLs: the server's

An earlier engine's mode=shards wrote `"written_by": "mode=shards"` into its manifest, which
still marks that set its own (engine/data/shards/writer.py); shards.dir's `.shards.lock` does
that now.

An entry of a local shard whose size or mtime differs from the file's now, or that does not
hold under the member rules of this read (engine/data/shards/members.py `Rules.mismatch`), is
stale: the shard is read again (labels only, no image decoded) and its entry kept in the
reader's own record under `dataset.manifest_cache` (engine/data/shards/counts.py), never
written into the shards' folder. Remote shards (URLs, `pipe:`, fsspec) take their entries from the manifest beside them,
which `mode=shards` writes, or `python -m engine.data.shards.manifest PATTERN... --out
shards.json` for shards written elsewhere (it reads each once). `http(s)://` shards whose server
has no manifest (404) are counted once instead and their manifest cached locally
(engine/data/shards/tally.py); other remote shards must be listed.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
from dataclasses import dataclass
from typing import Annotated, Literal, TypedDict

from engine.core.bounds import Bound, Count
from engine.core.io import atomic_write_bytes
from engine.core.records import parse_json, problem, regular_file_bytes
from engine.core.text import shown
from engine.data.shards import BUILD_HINT, ShardError
from engine.data.shards.members import LABEL_LIMIT, Rules, read_records, split_exts
from engine.data.shards.openers import Missing
from engine.data.shards.remote import Network, read_remote
from engine.data.shards.sources import expand_shards, kind, open_shard

log = logging.getLogger(__name__)

NAME = "shards.json"
FORMAT, VERSION = "tar-shards", 1
MAX_CONTAINERS = 4_000_000  # lists and objects a manifest may hold
MAX_BYTES = 2**32  # a manifest of ~10^9 labels; past it, surely not one


class StoredRules(TypedDict):
    """The member rules an entry was read under (`Rules.stored`)."""

    image_exts: list[str]
    ignore_exts: list[str]
    max_member_bytes: Count | None


class _Counted(TypedDict):
    samples: Count
    labels: list[Annotated[int, Bound(-1, LABEL_LIMIT - 1)]]  # -1: a sample with an error
    label_from: str
    errors: list[tuple[Count, str]]  # [position, reason]


class Entry(_Counted, total=False):
    """One shard's entry (see the module docstring)."""

    error: str
    size: Annotated[int, Bound(0)]
    mtime_ns: Annotated[int, Bound(0)]
    etag: str
    last_modified: str
    rules: StoredRules
    digest: str  # in the reader's own record of counted URLs (engine/data/shards/tally.py)


class _Head(TypedDict):
    format: Literal["tar-shards"]
    version: int
    shards: dict[str, Entry]


class ManifestFile(_Head, total=False):
    """A whole manifest file."""

    classes: list[str] | None
    written_by: str


@dataclass
class Manifest:
    """A manifest's location, classes and entries (see the module docstring)."""

    location: str
    classes: list[str] | None
    entries: dict[str, dict]
    written_by: str | None = None  # "mode=shards": an earlier engine's mode=shards wrote it

    @property
    def base(self) -> str:
        """The folder entry names are relative to (an absolute path for a local manifest)."""
        folder = self.location.rpartition("/")[0]
        return os.path.abspath(os.path.dirname(self.location)) if _local(self) else folder

    def name_of(self, shard: str) -> str:
        """The entry name of `shard`: relative to the manifest's folder when inside it."""
        full = os.path.abspath(shard) if kind(shard) == "local" and _local(self) else shard
        return full[len(self.base) + 1 :] if full.startswith(self.base + "/") else shard

    def entry(self, shard: str) -> dict | None:
        return self.entries.get(self.name_of(shard)) or self.entries.get(shard)

    def save(self) -> None:
        """Write the manifest atomically, one shard per line, readable by all (mode 644, as
        the shards are, for whatever serves them; the temporary file it replaces is private)."""
        head = {"format": FORMAT, "version": VERSION} | (
            {"classes": self.classes} if self.classes else {}
        )
        head |= {"written_by": self.written_by} if self.written_by else {}
        shards = ",\n".join(
            f"  {json.dumps(name)}: {json.dumps(entry, sort_keys=True)}"
            for name, entry in sorted(self.entries.items())
        )
        text = f'{json.dumps(head)[:-1]}, "shards": {{\n{shards}\n}}}}\n'
        atomic_write_bytes(self.location, text.encode())
        os.chmod(self.location, 0o644)


def save_or_warn(manifest: Manifest, otherwise: str, key: str) -> bool:
    """Write `manifest` (its folder made); whether it was written. A place that cannot take
    it costs a warning saying what follows (`otherwise`) and the config `key` that moves it,
    not the run."""
    try:
        os.makedirs(os.path.dirname(manifest.location) or ".", exist_ok=True)
        manifest.save()
        return True
    except OSError as err:
        log.warning(
            "cannot write the shard manifest %s (%s): %s; set %s to a writable place.",
            shown(manifest.location),
            err,
            otherwise,
            key,
        )
        return False


def _local(manifest: Manifest) -> bool:
    return kind(manifest.location) == "local"


def default_location(shards: list[str], key: str) -> str:
    """`shards.json` in the folder of the first shard (a `pipe:` source has none)."""
    if kind(shards[0]) == "pipe":
        raise ValueError(
            f"{key}: pipe: sources have no folder for the manifest; set dataset.manifest to "
            f"its file or URL (make one with {BUILD_HINT})."
        )
    head = shards[0].rpartition("/")[0] if kind(shards[0]) != "local" else None
    return f"{head}/{NAME}" if head else os.path.join(os.path.dirname(shards[0]) or ".", NAME)


def _read(location: str, network: Network, optional: bool = False) -> bytes | None:
    """The manifest file's bytes; None for a missing local file, or a missing remote one when
    `optional` (else that is an error). A local one must be a regular file of at most
    MAX_BYTES (a FIFO would hang the start)."""
    if kind(location) == "local":
        try:
            return regular_file_bytes(location, MAX_BYTES, "a shard manifest")
        except FileNotFoundError:
            return None
        except ValueError as err:
            raise ValueError(
                f"dataset.manifest: {shown(location)}: {err}; set dataset.manifest to another file."
            ) from None
    try:
        return read_remote(location, kind(location), network)
    except ShardError as err:
        if optional and isinstance(err, Missing):
            return None
        raise ValueError(
            f"dataset.manifest: cannot read the manifest of these remote shards "
            f"({str(err).rstrip('.')}); write one with {BUILD_HINT} (or mode=shards) and put "
            "it beside them or set dataset.manifest to it; or, for http(s):// shards, leave "
            "dataset.manifest null: with no manifest beside them they are counted at start-up."
        ) from None


def load(location: str, network: Network) -> Manifest:
    """The manifest at `location`; an empty one when a local file is missing."""
    text = _read(location, network)
    return Manifest(location, None, {}) if text is None else _parse(location, text)


def load_beside(location: str, network: Network) -> Manifest | None:
    """The remote manifest at `location`, or None when the server has none (HTTP 404, 410)."""
    text = _read(location, network, optional=True)
    return None if text is None else _parse(location, text)


def _parse(location: str, text: bytes) -> Manifest:
    containers = text.count(b"[") + text.count(b"{")  # what json.loads would build, cheaply
    if containers > MAX_CONTAINERS:
        raise ValueError(
            f"dataset.manifest: {shown(location)} holds {containers:,} lists and objects, more "
            f"than a manifest holds ({MAX_CONTAINERS:,}: about 3 per shard, 1 per bad sample); "
            "set dataset.manifest to another file."
        )
    try:
        data = parse_json(text)
    except ValueError:  # not JSON, not UTF-8, or nested past the stack
        data = None
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise ValueError(
            f"dataset.manifest: {shown(location)} is not a shard manifest (no "
            f'"format": "{FORMAT}"); set dataset.manifest to another file.'
        )
    if data.get("version") != VERSION:
        raise ValueError(
            f"dataset.manifest: {shown(location)} is format version {data.get('version')!r}, "
            f"this code reads {VERSION}: delete it, or write it again with {BUILD_HINT}."
        )
    why = problem(data, ManifestFile) or next(
        (f"the entry of {shown(name)} {p}" for name, e in data["shards"].items() if (p := _odd(e))),
        None,
    )
    if why is not None:
        raise ValueError(
            f"dataset.manifest: {shown(location)}: {why}; it was not written by this "
            f"project or was changed: write it again with {BUILD_HINT} (or mode=shards)."
        )
    return Manifest(location, data.get("classes"), data["shards"], data.get("written_by"))


def _odd(entry: Entry) -> str | None:
    """What in one shard's entry of the right types contradicts itself, or None."""
    labels = entry["labels"]
    if len(labels) != entry["samples"]:
        return f"has {len(labels)} labels for {entry['samples']} samples"
    if {e[0] for e in entry["errors"]} != {i for i, label in enumerate(labels) if label == -1}:
        return "has 'errors' at other positions than its labels of -1 (a sample with an error)"
    return None


def scan(shard: str, rules: Rules, network: Network, limit: int | None = None) -> dict:
    """A manifest entry for `shard`, read from end to end (labels only, no image decoded); a
    remote one may not be longer than `limit` bytes."""
    entry: dict = {"samples": 0, "labels": [], "label_from": rules.label_from, "errors": []}
    entry["rules"] = rules.stored()
    if kind(shard) == "local":
        stat = os.stat(shard)
        entry |= {"size": stat.st_size, "mtime_ns": stat.st_mtime_ns}
    try:
        with open_shard(shard, network, limit) as stream:
            for record in read_records(stream, shard, rules):
                if record.error is not None:
                    entry["errors"].append([entry["samples"], record.error])
                entry["labels"].append(record.label)
                entry["samples"] += 1
            if kind(shard) != "local":  # its length: the most a later read may take
                entry["size"] = stream.raw.offset  # type: ignore[attr-defined]
    except ShardError as err:
        entry["error"] = str(err)
    return entry


def build(
    shards: list[str], location: str, rules: Rules, classes: list[str] | None = None
) -> Manifest:
    """Read every shard once and save their manifest at `location` (kept entries of other
    shards stay); returns it."""
    manifest = load(location, Network())
    if classes is not None:
        manifest.classes = list(classes)
    for shard in shards:
        manifest.entries[manifest.name_of(shard)] = scan(shard, rules, Network())
    manifest.save()
    return manifest


def main(argv: list[str] | None = None) -> None:
    """CLI: read every shard the patterns name once and write their manifest."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("patterns", nargs="+", help="shards: paths, globs, brace patterns, URLs")
    parser.add_argument("--out", required=True, help=f"the manifest file to write ({NAME})")
    parser.add_argument("--label-field", default=None, help="labels from this .json field")
    parser.add_argument("--image-exts", default="jpg;jpeg;png;webp", help="image extensions")
    parser.add_argument("--ignore-exts", default="", help="extensions to pass over")
    args = parser.parse_args(argv)
    images = split_exts(args.image_exts, "--image-exts")
    rules = Rules(images, args.label_field, split_exts(args.ignore_exts, "--ignore-exts"))
    shards = expand_shards(args.patterns, "patterns")
    manifest = build(shards, args.out, rules)
    for shard in shards:
        entry = manifest.entry(shard) or {}
        print(f"{shard}: {entry.get('samples', 0)} samples", entry.get("error", ""))
    print(f"wrote {args.out} ({len(manifest.entries)} shards)")


if __name__ == "__main__":
    main()
