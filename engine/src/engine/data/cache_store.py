"""The pre-resized image store of `mode=cache`: one split's images in one memory-mapped file.

A split folder holds
- the data file, by the `encoding` setting: `pixels.u8` (raw: every image's HWC uint8 pixels)
  or `jpegs.bin` (jpeg: every image as a complete JPEG file), one after another;
- `index.i64`: per image (offset and length in bytes in the data file, height, width, label),
  int64;
- `sources.npz`: each image's source path, size (bytes) and mtime (ns), in cache order;
- `manifest.json`: the format version, settings and classes it was built with; written first
  and removed last, it marks the folder's other files the cache's own: a build never replaces
  or removes a file of these names in a folder without one (they are someone else's);
- `progress.json`: images committed so far and their data bytes (rewritten atomically).
Entries are appended in source order and committed every few hundred images, so an
interrupted build resumes from its last commit (bytes past it are cut off). A build or a
reader whose settings or sources differ from the stored ones is refused, naming the file.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated, Any, TypedDict

import numpy as np

from engine.core.bounds import Bound, Count
from engine.core.io import write_json
from engine.core.records import Open, RecordError, read_record

FORMAT_VERSION = 2  # 2: the nbytes column and the jpeg encoding
FIELDS = 5  # index.i64 columns: offset, nbytes, height, width, label
DATA_FILES = {"raw": "pixels.u8", "jpeg": "jpegs.bin"}  # the data file of each encoding
# every file a cache split folder holds (manifest.json first written, last removed)
OWN_FILES = ("manifest.json", "progress.json", "sources.npz", "index.i64", *DATA_FILES.values())
REBUILD_HINT = "run `make cache ARGS='cache.rebuild=true ...'` (or delete {dir}) to build it anew"
MAX_RECORD_BYTES = 2**24  # a manifest.json or progress.json: settings and class names


class CacheManifest(TypedDict):
    """What every cache format's manifest.json holds (older formats: other keys besides)."""

    format: int
    settings: dict[str, Any]
    classes: list[str]


class Progress(TypedDict):
    """progress.json: images committed so far and their data bytes."""

    done: Count
    data_bytes: Annotated[int, Bound(0)]


def _read(folder: Path, name: str, schema: Any) -> Any:
    """The cache's own `name` (manifest.json, progress.json), read as hostile input."""
    fix = f"it is the cache's own record; {REBUILD_HINT.format(dir=folder)}."
    return read_record(folder / name, schema, MAX_RECORD_BYTES, f"a cache's {name}", fix)


def _manifest(folder: Path) -> CacheManifest:
    manifest = _read(folder, "manifest.json", Annotated[CacheManifest, Open()])
    _check_format(folder, manifest)
    return manifest


class StaleCacheError(RuntimeError):
    """The cache does not match its sources or settings any more."""


def is_jpeg_quality(value: object) -> bool:
    """Whether `value` is a JPEG quality: an int from 1 to 100 (not a bool)."""
    return isinstance(value, int) and not isinstance(value, bool) and 1 <= value <= 100


def data_file(settings: dict) -> str:
    """The name of the data file of a cache built with `settings` (see DATA_FILES)."""
    return DATA_FILES[settings["encoding"]]  # format 2 always stores it (older ones are refused)


def _check_format(folder: Path, stored: dict) -> None:
    """Refuse a cache written in another format version (older code, other index columns)."""
    if stored.get("format") != FORMAT_VERSION:
        raise StaleCacheError(
            f"cache {folder} was written in cache format {stored.get('format')}, this version "
            f"reads format {FORMAT_VERSION}: {REBUILD_HINT.format(dir=folder)}."
        )


def source_stats(paths: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """(size in bytes, mtime in ns) of every path; a missing file gets (-1, -1)."""
    sizes, mtimes = np.full(len(paths), -1, np.int64), np.full(len(paths), -1, np.int64)
    for i, path in enumerate(paths):
        try:
            stat = os.stat(path)
        except FileNotFoundError:
            continue
        sizes[i], mtimes[i] = stat.st_size, stat.st_mtime_ns
    return sizes, mtimes


def _write_sources(folder: Path, paths: list[str]) -> None:
    """sources.npz: every path with its size and mtime now (atomically replaced)."""
    sizes, mtimes = source_stats(paths)
    encoded = np.array([os.fsencode(p) for p in paths], dtype=np.bytes_)
    tmp = folder / ".sources.tmp.npz"
    np.savez(tmp, paths=encoded, sizes=sizes, mtimes=mtimes)
    os.replace(tmp, folder / "sources.npz")


def _first_change(stored: dict[str, np.ndarray], paths: list[str], cached: int) -> str | None:
    """A sentence naming the first difference between the stored sources and `paths` now
    (the listing, and size and mtime of the first `cached` entries), or None."""
    stored_paths = [os.fsdecode(p) for p in stored["paths"]]
    for i, (old, new) in enumerate(zip(stored_paths, paths, strict=False)):
        if old != new:
            return f"entry {i} was cached from {old}, but the dataset now lists {new} there"
    if len(stored_paths) != len(paths):
        return f"it holds {len(stored_paths)} sources, the dataset now lists {len(paths)}"
    sizes, mtimes = source_stats(paths[:cached])
    changed = np.flatnonzero(
        (sizes != stored["sizes"][:cached]) | (mtimes != stored["mtimes"][:cached])
    )
    if len(changed):
        i = int(changed[0])
        what = "is missing" if sizes[i] < 0 else "changed (size or modification time)"
        return f"{len(changed)} sources changed since caching, e.g. entry {i}: {paths[i]} {what}"
    return None


def _is_cache(folder: Path) -> bool:
    """Whether `folder` holds a cache (its manifest.json); a manifest.json that is not a
    cache's, or files of a cache's names without one, are someone else's: refused, naming the
    file, never replaced (mode=cache may be pointed at any folder)."""
    if (folder / "manifest.json").exists():
        try:
            _read(folder, "manifest.json", Annotated[CacheManifest, Open()])
            return True
        except RecordError:
            found = "manifest.json that is not a cache's (no format, settings and classes)"
    else:
        others = [name for name in OWN_FILES if (folder / name).exists()]
        if not others:
            return False
        found = f"{others[0]} without the manifest.json of a cache beside it"
    raise FileExistsError(
        f"cache.dir: {folder} holds a {found}: mode=cache replaces only the files it wrote "
        "itself; set cache.dir to another folder."
    )


def _progress(folder: Path) -> Progress | None:
    """progress.json of a cache, or None when the build was cut before its first commit
    (progress.json or sources.npz not written yet)."""
    if not (folder / "sources.npz").exists() or not (folder / "progress.json").exists():
        return None  # a FIFO or a folder of that name is named by _read, not taken for none
    return _read(folder, "progress.json", Progress)


class CacheWriter:
    """Appends one split's images; resumes a compatible unfinished build, refuses a stale one."""

    def __init__(
        self, folder: Path, paths: list[str], settings: dict, classes: list[str], rebuild: bool
    ) -> None:
        self.folder = Path(folder)
        ours = _is_cache(self.folder)
        if rebuild and ours:  # only the cache's own files: a folder may hold others
            for name in (*OWN_FILES[1:], OWN_FILES[0]):  # the manifest, their mark, last
                (self.folder / name).unlink(missing_ok=True)
            ours = False
        manifest = {"format": FORMAT_VERSION, "settings": settings, "classes": list(classes)}
        if not ours:
            self.folder.mkdir(parents=True, exist_ok=True)
            write_json(self.folder / "manifest.json", manifest)  # first: the others are ours
        progress = _progress(self.folder) if ours else None
        if progress is not None:
            self._check(manifest, paths, progress["done"])
        else:
            if ours:  # a build cut before its first commit: its settings must match still
                self._check(manifest, None, 0)
            progress = {"done": 0, "data_bytes": 0}
            write_json(self.folder / "progress.json", progress)
        _write_sources(self.folder, paths)  # the entries still to cache: as they are now
        self.done, self.data_bytes = progress["done"], progress["data_bytes"]
        self._data = open(self.folder / data_file(settings), "ab")  # noqa: SIM115 (see close())
        self._index = open(self.folder / "index.i64", "ab")  # noqa: SIM115
        for f, size in ((self._data, self.data_bytes), (self._index, self.done * FIELDS * 8)):
            f.truncate(size)  # drop what an interrupted build wrote after its last commit

    def _check(self, manifest: dict, paths: list[str] | None, done: int) -> None:
        """Refuse a cache built with other settings or classes, or (unless `paths` is None)
        whose first `done` sources changed since."""
        stored = _manifest(self.folder)
        hint = REBUILD_HINT.format(dir=self.folder)
        if stored != manifest:
            old, new = stored["settings"], manifest["settings"]
            keys = [f"cache.{k}" for k in sorted({*old, *new}) if old.get(k) != new.get(k)]
            raise StaleCacheError(
                f"cache {self.folder} differs in {', '.join(keys) or 'classes'}: built with {old} "
                f"and classes {stored['classes']}, not {new} and {manifest['classes']}: "
                f"{hint}, or set cache.dir to another folder."
            )
        if paths is None:
            return
        with np.load(self.folder / "sources.npz") as sources:
            change = _first_change(dict(sources), paths, done)
        if change:
            raise StaleCacheError(f"cache {self.folder} is stale: {change}. Not mixing: {hint}.")

    def append(self, data: np.ndarray, height: int, width: int, label: int) -> None:
        """Add the next image: `data` is its HWC uint8 pixels or its JPEG file's bytes."""
        data = np.ascontiguousarray(data, dtype=np.uint8)
        self._data.write(data.tobytes())
        record = np.array([self.data_bytes, data.size, height, width, label], dtype=np.int64)
        self._index.write(record.tobytes())
        self.data_bytes += data.size
        self.done += 1

    def commit(self) -> None:
        """Make everything appended so far survive a crash (fsync, then the progress file)."""
        for f in (self._data, self._index):
            f.flush()
            os.fsync(f.fileno())
        write_json(
            self.folder / "progress.json", {"done": self.done, "data_bytes": self.data_bytes}
        )

    def close(self) -> None:
        self.commit()
        self._data.close()
        self._index.close()


def open_cache(
    folder: Path, check_sources: bool, expected: dict | None = None
) -> tuple[dict, np.ndarray, np.ndarray]:
    """(manifest, index rows N x FIELDS, source paths as fsencoded bytes) of a complete cache;
    refuses one of another format, an unfinished one, one whose settings differ from the
    non-None values of `expected` (`dataset.<key>`), and with `check_sources` one whose
    sources changed since."""
    folder = Path(folder)
    if not (folder / "manifest.json").is_file():
        raise FileNotFoundError(
            f"dataset.root: {folder} holds no image cache (no manifest.json). Build it with "
            "`make cache` (python train.py mode=cache cache.dir=...) and point dataset.root at "
            "cache.dir."
        )
    manifest = _manifest(folder)
    for key, value in (expected or {}).items():
        if value is not None and manifest["settings"].get(key) != value:
            raise StaleCacheError(
                f"cache {folder} was built with cache.{key}={manifest['settings'].get(key)!r}, "
                f"not dataset.{key}={value!r}: point dataset.root at a cache built with it, or "
                f"set dataset.{key}=null to read any."
            )
    progress = _progress(folder)
    if progress is None:
        raise StaleCacheError(
            f"cache {folder} is unfinished (its build was cut before its first commit): run "
            "`make cache` again with the same settings to finish it."
        )
    with np.load(folder / "sources.npz") as sources:
        stored = dict(sources)
    done = progress["done"]
    if done < len(stored["paths"]):
        raise StaleCacheError(
            f"cache {folder} is unfinished ({done} of {len(stored['paths'])} images): run "
            "`make cache` again with the same settings to finish it (it resumes)."
        )
    if check_sources:
        paths = [os.fsdecode(p) for p in stored["paths"]]
        change = _first_change(stored, paths, len(paths))
        if change:
            raise StaleCacheError(
                f"cache {folder} is stale: {change}. {REBUILD_HINT.format(dir=folder)}, or set "
                "dataset.check_sources=false to train on the cached pixels as they are."
            )
    index = np.fromfile(folder / "index.i64", dtype=np.int64).reshape(-1, FIELDS)[:done]
    return manifest, index, stored["paths"]
