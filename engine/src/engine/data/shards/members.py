"""What one tar shard holds, by WebDataset's rules.

A member's key is its name up to the first dot of its base name and its extension the rest,
lower-cased (webdataset's `base_plus_ext`, the same regular expression: `dir/sub_000123.jpg` is
key `dir/sub_000123` + `jpg`, `img.v2.000123.jpg` is key `img` + `v2.000123.jpg`); members in a
row with one key are one sample (its `group_by_keys`); names like `__meta__`, and names with no
key and extension (`README`, macOS `._x.png`), are passed over as webdataset does, and macOS
AppleDouble files in folders (`dir/._x.png`, which webdataset makes a bogus sample of) too: not
samples, so neither errors nor counted against `max_bad_fraction`. A sample's image is the first of `image_exts` it has, its label the class
index in its `.cls` member or in field `label_field` of its `.json` member.
A member whose extension `ignore_exts` lists is passed over entirely (it joins no sample and
makes none, wherever it lies). A sample without an image or a label, or with a member whose
extension no rule knows, is a `Record` with an `error` naming the shard and member; a shard that
is not a readable tar to its end (engine/data/shards/tar_stream.py) raises a `ShardError`, as does
a member larger than any image within the pixel limit.
"""

from __future__ import annotations

import json
import re
import tarfile
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cached_property, partial
from typing import BinaryIO, NamedTuple

from engine.core.text import shown
from engine.data.shards import ShardError
from engine.data.shards.tar_stream import tar_files

KEY_EXT = re.compile(r"^((?:.*/|)[^.]+)[.]([^/]*)$")  # webdataset.tariterators.base_plus_ext
META = re.compile(r"__[^/]*__($|/)")  # webdataset's skip_meta
LABEL_LIMIT = 2**31  # class indices are below this (labels are int64 arrays, classes a list)


@dataclass(frozen=True)
class Rules:
    """Which members make a sample (dataset.image_exts, label_field, ignore_exts) and the
    largest member that is read (from dataset.decode.max_image_pixels; None: no limit)."""

    image_exts: tuple[str, ...] = ("jpg", "jpeg", "png", "webp")
    label_field: str | None = None
    ignore_exts: tuple[str, ...] = ()
    max_member_bytes: int | None = None

    @property
    def label_from(self) -> str:
        """`cls`, or `json:FIELD`: where labels come from (stored with them in a manifest)."""
        return f"json:{self.label_field}" if self.label_field else "cls"

    def stored(self) -> dict:
        """The rules, beside `label_from`, that shape a shard's record (which members make a
        sample, which are errors, where the shard stops being read): what a manifest entry
        stores of the rules it was read under."""
        return {
            "image_exts": list(self.image_exts),
            "ignore_exts": list(self.ignore_exts),
            "max_member_bytes": self.max_member_bytes,
        }

    def mismatch(self, entry: dict) -> str | None:
        """Why a manifest `entry` does not hold under these rules, or None. It holds when read
        under the same extension rules (and, if a shard's read broke off, the same member size
        limit), or, having no fault, under rules these only widen (more image or passed-over
        extensions): each of its samples keeps its image and label. An entry storing no rules
        (older writers) counts as read under the default ones."""
        if entry.get("label_from") != self.label_from:
            return f"labels from {entry.get('label_from')} were read, not {self.label_from}"
        stored, now = entry.get("rules") or Rules().stored(), self.stored()
        exts = ("image_exts", "ignore_exts")
        limits = stored["max_member_bytes"], now["max_member_bytes"]
        if all(stored[key] == now[key] for key in exts):
            if "error" not in entry or limits[0] == limits[1]:
                return None
            return (
                f"its read broke off under a member size limit of {limits[0]} bytes "
                f"(dataset.decode.max_image_pixels), now {limits[1]}"
            )
        images, ignored = set(stored["image_exts"]), set(stored["ignore_exts"])
        faulty = entry.get("errors") or "error" in entry
        if not faulty and images <= set(self.image_exts) and ignored <= self.known:
            return None
        changed = ", ".join(
            f"dataset.{key}={';'.join(stored[key]) or 'null'} (now {';'.join(now[key]) or 'null'})"
            for key in exts
            if stored[key] != now[key]
        )
        return f"it was read under other member rules: {changed}"

    @cached_property
    def read(self) -> frozenset[str]:
        """Extensions whose members are read (the others are passed over)."""
        return frozenset((*self.image_exts, "json" if self.label_field else "cls"))

    @cached_property
    def known(self) -> frozenset[str]:
        """Extensions a sample may have without error."""
        return frozenset((*self.image_exts, "cls", "json", *self.ignore_exts))


class Record(NamedTuple):
    """One sample of a shard: `SHARD::MEMBER` of its image, the encoded image, the label, or
    (image None, label -1) the one-line reason it breaks the rules."""

    name: str
    image: bytes | None
    label: int
    error: str | None = None


def split_exts(value: str | None, key: str) -> tuple[str, ...]:
    """`jpg;png` (WebDataset's way of listing alternatives) as ('jpg', 'png'); `key` names
    the setting in the error when an image list is empty."""
    exts = tuple(e.strip().lower().lstrip(".") for e in (value or "").split(";") if e.strip())
    if "image" in key and not exts:
        raise ValueError(f"{key}={value!r}: name at least one extension, e.g. jpg;png.")
    return exts


def parse_label(data: bytes, where: str) -> int:
    """The class index a `.cls` member holds (ASCII digits), or a `ShardError` naming it."""
    text = data.decode("utf-8", "replace").strip()
    if not (text.isascii() and text.isdigit() and len(text) <= 10 and int(text) < LABEL_LIMIT):
        raise ShardError(
            f"{where}: a .cls member must hold a class index (0, 1, ... below 2**31), not "
            f"{text[:40]!r}; "
            "write the index of the class in dataset.classes_file instead of its name."
        )
    return int(text)


def json_label(data: bytes, field: str, where: str) -> int:
    """The class index in field `field` of a `.json` member, or a `ShardError` naming it."""
    try:
        value = json.loads(data)[field]
    except (ValueError, KeyError, TypeError, IndexError):
        value = None
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < LABEL_LIMIT:
        raise ShardError(
            f"{where}: no class index (0, 1, ...) in field {field!r} of this .json member; set "
            "dataset.label_field to the field that holds it, or null to read .cls members."
        )
    return value


def _bad(shard: str, member: str, reason: str) -> Record:
    """A sample that breaks the rules, named by its shard and `member`."""
    name = f"{shown(shard)}::{shown(member)}"
    return Record(name, None, -1, f"{name}: {reason}")


def _record(shard: str, fields: dict[str, tuple[str, bytes | None]], rules: Rules) -> Record:
    """The sample one key's members make, or why they make none."""
    for ext, (member, _) in fields.items():
        if ext not in rules.known:
            images = ", ".join(rules.image_exts)
            reason = (
                f"extension {ext!r} fits no sample rule (images: {images}; labels: cls, json); "
                "add it to dataset.ignore_exts to pass such members over, or to "
                "dataset.image_exts if it is an image."
            )
            return _bad(shard, member, reason)
    image = next((fields[ext] for ext in rules.image_exts if ext in fields), None)
    members = [shown(member) for member, _ in fields.values()]
    if image is None:
        reason = (
            f"a sample without an image (members {members}); each key needs one of "
            f".{', .'.join(rules.image_exts)} (dataset.image_exts)."
        )
        return _bad(shard, members[0], reason)
    ext = "json" if rules.label_field else "cls"
    if ext not in fields:
        fix = "" if rules.label_field else ", or set dataset.label_field to read it from .json"
        return _bad(shard, image[0], f"a sample without a label (no .{ext} member); add one{fix}.")
    member, data = fields[ext]
    where = f"{shown(shard)}::{shown(member)}"
    try:
        if rules.label_field:
            label = json_label(data or b"", rules.label_field, where)
        else:
            label = parse_label(data or b"", where)
    except ShardError as err:
        return Record(f"{shown(shard)}::{shown(image[0])}", None, -1, str(err))
    return Record(f"{shown(shard)}::{shown(image[0])}", image[1], label)


def _is_meta(name: str) -> bool:
    """Passed over: what webdataset's tar_file_iterator passes over (`__key__`-like names),
    and a macOS AppleDouble file (`._x.jpg`, at any depth: macOS tar writes `dir/._x.jpg`
    for each `dir/x.jpg`, which webdataset reads as key `dir/` + extension `_x.jpg`)."""
    top = "/" not in name and name.startswith("__") and name.endswith("__")
    return top or META.match(name) is not None or name.rpartition("/")[2].startswith("._")


def read_records(stream: BinaryIO, shard: str, rules: Rules) -> Iterator[Record]:
    """The samples of one shard (`stream`, plain or gzip-compressed tar) in stored order."""
    fields: dict[str, tuple[str, bytes | None]] = {}
    key = None
    for name, data in tar_files(stream, shard, partial(_wanted, shard=shard, rules=rules)):
        if _is_meta(name):
            continue
        split = KEY_EXT.match(name)
        if split is None:  # `README`, macOS `._x.png`: no sample's member, as webdataset
            continue  # passes them over (group_by_keys), not a sample, so no bad one either
        member_key, ext = split.group(1), split.group(2).lower()
        if ext in rules.ignore_exts:  # passed over entirely: it joins no sample, makes none
            continue
        if member_key != key:
            if fields:
                yield _record(shard, fields, rules)
            key, fields = member_key, {}
        if ext in fields:
            reason = f"a second .{ext} member for key {shown(member_key)!r} in a row"
            yield _bad(shard, name, f"{reason}; a key's members must be unique.")
            key, fields = None, {}
            continue
        fields[ext] = (name, data)
    if fields:
        yield _record(shard, fields, rules)


def _wanted(member: tarfile.TarInfo, shard: str, rules: Rules) -> bool:
    """Whether `member`'s data is read: an image or label member, refused when larger than
    the rules allow (a damaged size field, or no image within the pixel limit)."""
    split = KEY_EXT.match(member.name)
    if split is None or _is_meta(member.name) or split.group(2).lower() not in rules.read:
        return False
    limit = rules.max_member_bytes
    if limit is not None and member.size > limit:
        raise ShardError(
            f"{shown(shard)}::{shown(member.name)}: {member.size:,} bytes, more than an image "
            f"within dataset.decode.max_image_pixels can take ({limit:,} bytes)."
        )
    return True
