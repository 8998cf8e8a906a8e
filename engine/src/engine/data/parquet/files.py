"""The Parquet files of a split, found and opened, each footer checked as hostile input before
a row is read.

Files are named relative to `dataset.root`, a local folder, an `https://...` prefix (the
files named) or any fsspec URL (`s3://...`, `hf://datasets/ORG/NAME` with `huggingface_hub`),
by the globs of `dataset.<split>_files`, or, when those are null, by the Hugging Face layout's
split names:
`train-00000-of-00004.parquet`, `validation-*`/`val-*`, `test-*`, or the same words as a folder
(`default/train/0000.parquet`). A footer is the file's own index of row groups; one that
claims bytes beyond the file, or a row group over `dataset.max_row_group_bytes`, is refused
before anything it declares is read. An `http(s)://` file is read as remote tar shards are
(engine/data/shards/remote.py): by Range requests, retried, within `dataset.read_timeout`.
"""

from __future__ import annotations

import os
import posixpath
import re
import stat
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from engine.core.text import shown
from engine.data.parquet.layout import SPLIT_WORDS, image_bytes_field, label_kind
from engine.data.shards import ShardError
from engine.data.shards.remote import Network, open_ranged
from engine.data.shards.sources import check_fsspec, kind, named_once

FOOTER_BYTES = 8  # the footer's length and the closing magic `PAR1`
KEYS = "dataset.root / dataset.<split>_files"  # what names a file, for the fix of a bad URL


class ParquetFileError(ValueError):
    """A file that cannot be a split's Parquet file: unreadable, lying, or of the wrong
    columns. Its message is one line naming the file and the key."""


@dataclass(frozen=True)
class Layout:
    """What a checked footer says: rows per row group, how the image column holds its bytes
    (`struct`: the `bytes` field of the `Image` struct), the label column's kind
    (engine/data/parquet/layout.py label_kind) and the schema (for ClassLabel names)."""

    path: str
    group_rows: tuple[int, ...]
    struct: bool
    labels: str
    schema: pa.Schema


def _is_url(name: str) -> bool:
    return kind(name) != "local"


SEPARATORS = "-._ 0123456789"  # datasets' NON_WORDS_CHARS around a split word
SHARDED = re.compile(r"data/(?P<split>[^/]+)-\d{5}-of-\d{5}[^/]*\.[^/]*")  # SPLIT_PATTERN_SHARDED
SPLIT_NAME = re.compile(r"\w+(\.\w+)*")  # datasets' _split_re: what a sharded name may call a split
SHARDED_SPLITS = {"train": "train", "validation": "val", "val": "val", "test": "test"}


def _names_split(part: str, word: str, first: bool) -> bool:
    """Whether `part` (a folder or file name) names split `word` as datasets' patterns do
    (case-sensitive, as its globs): the word, or the word between separators (or at the
    start, when `first`)."""
    if part == word:
        return True
    at = part.find(word)
    while at >= 0:
        before = part[at - 1] if at else ""
        after = part[at + len(word) : at + len(word) + 1]
        if (before in SEPARATORS if before else first) and (after == "" or after in SEPARATORS):
            return True
        at = part.find(word, at + 1)
    return False


def _splits_by(relative: str, folders: bool) -> list[str]:
    """The splits the folders (`folders`) or else the file name of `relative` name."""
    parts = relative.split("/")
    names = parts[:-1] if folders else [parts[-1]]
    return [
        split
        for split, words in SPLIT_WORDS.items()
        if any(_names_split(name, word, True) for name in names for word in words)
    ]


RULES = (
    "the data/<split>-00000-of-00001 file names",
    "the folder names",
    "the file names",
    "the absence of any split word (every file is train)",
)


def splits_of(relatives: list[str]) -> tuple[dict[str, str], str]:
    """Each file's split, resolved as `datasets` resolves a folder's data files
    (datasets/data_files.py `_get_data_files_patterns`), the first rule that finds any file
    deciding for all: `data/<split>-00000-of-00001*` files alone when there are any (`data/`
    beats a `train.parquet` beside it; a split named otherwise than train, validation, val or
    test is none of the template's); else the split a folder names (`test/train-0.parquet` is
    test); else the split a file name names; else every file is train. Also which of RULES
    decided. Where `datasets` would put one file in two splits (`train_test.parquet`), or
    refuses a sharded split name, one ValueError names the file: on purpose, never the same
    samples in train and test."""
    sharded = {r: m["split"] for r in relatives if (m := SHARDED.fullmatch(r))}
    if sharded:
        bad = next((r for r, split in sharded.items() if not SPLIT_NAME.fullmatch(split)), None)
        if bad is not None:
            raise ValueError(
                f"{shown(bad)}: datasets reads data/<split>-NNNNN-of-NNNNN names as splits, and "
                f"{sharded[bad]!r} is no split name (letters, digits, _ and . only): rename it."
            )
        placed = {r: SHARDED_SPLITS[s] for r, s in sharded.items() if s in SHARDED_SPLITS}
        return placed, RULES[0]
    for folders, rule in ((True, RULES[1]), (False, RULES[2])):
        found = {r: splits for r in relatives if (splits := _splits_by(r, folders))}
        twice = next((r for r, splits in found.items() if len(splits) > 1), None)
        if twice is not None:
            raise ValueError(
                f"{shown(twice)}: {rule} name the {' and '.join(found[twice])} splits in it, "
                "and datasets would read it in each: rename it, or list each split's files with "
                "dataset.<split>_files."
            )
        if found:
            return {r: splits[0] for r, splits in found.items()}, rule
    return dict.fromkeys(relatives, "train"), RULES[3]


class Folder:
    """`dataset.root`: a local folder or a URL prefix, listed and opened alike; an http(s)
    file read as `network` says (retries, backoff, read timeout)."""

    def __init__(self, root: str, network: Network) -> None:
        if not isinstance(root, str) or not root:
            raise ValueError(
                f"dataset.root={root!r}: give the folder or URL that holds the Parquet files."
            )
        self.url, self.network = _is_url(root), network
        # ./x, x//y and x/. name the folder x/y names: one spelling, so names can be cut
        self.root = (root.rstrip("/") or "/") if self.url else os.path.normpath(root)
        if kind(self.root) == "pipe":
            raise ValueError(
                f"dataset.root={shown(root)}: a pipe: command cannot be read by row group; "
                "give a folder or URL."
            )
        self.fs: Any = None
        if kind(self.root) == "fsspec":
            check_fsspec(self.root, "dataset.root")
            import fsspec  # the `remote` extra; checked just above

            self.fs, _ = fsspec.core.url_to_fs(self.root)

    def name(self, relative: str) -> str:
        """The full name of `relative` (already full when it is a URL or an absolute path)."""
        if _is_url(relative) or os.path.isabs(relative):
            return relative
        return posixpath.join(self.root, relative) if self.url else str(Path(self.root, relative))

    def glob(self, pattern: str) -> list[str]:
        """The files `pattern` (relative to the root, or full) matches, sorted."""
        full = self.name(pattern)
        if not _is_url(full):
            return sorted(str(p) for p in _local_glob(full))
        fs, path = _fs_of(full)
        protocol = full.split("://", 1)[0]
        return sorted(p if "://" in p else f"{protocol}://{p}" for p in fs.glob(path))

    def every_parquet(self) -> list[str]:
        """Every `*.parquet` under the root, at any depth."""
        if self.url and kind(self.root) == "http":
            return []  # a web server cannot be searched: the files are named by the keys
        return self.glob("**/*.parquet")

    def open(self, name: str) -> tuple[pq.ParquetFile, int]:
        """`name` opened for reading by row group, and its size in bytes; only a regular file
        (a FIFO would block the open, a device never end)."""
        if kind(name) == "http":
            reader = open_ranged(name, self.network, KEYS)
            return pq.ParquetFile(reader), reader.size
        if not _is_url(name):
            what = _not_regular(Path(name))
            if what is not None:
                raise ParquetFileError(f"{shown(name)} is {what}, not a Parquet file.")
            return pq.ParquetFile(name), Path(name).stat().st_size
        fs, path = _fs_of(name)
        handle = fs.open(path, "rb")
        return pq.ParquetFile(handle), int(handle.size)


def _not_regular(path: Path) -> str | None:
    """What `path` is when it is no regular file (followed through links), else None."""
    try:
        mode = path.stat().st_mode
    except FileNotFoundError:
        return "a link to nothing" if path.is_symlink() else "missing"
    kinds = ((stat.S_ISDIR, "a folder"), (stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a device"))
    kinds += ((stat.S_ISBLK, "a device"), (stat.S_ISSOCK, "a socket"))
    return next((what for test, what in kinds if test(mode)), None)


def _local_glob(pattern: str) -> list[Path]:
    """What `pattern` matches, folders left out (Spark's `train.parquet/` holds the files it
    matches too), anything else kept, so a FIFO or a dangling link is named, not dropped."""
    import glob

    return [Path(p) for p in glob.glob(pattern, recursive=True) if not Path(p).is_dir()]


def _fs_of(url: str) -> tuple[Any, str]:
    import fsspec

    return fsspec.core.url_to_fs(url)


def split_files(folder: Folder, patterns: str | Sequence[str] | None, split: str) -> list[str]:
    """The files of `split`: those `patterns` (dataset.<split>_files) match, or the split's
    files in the Hugging Face layout under the root; each once, in name order."""
    key = f"dataset.{split}_files"
    if patterns is not None:
        listed = [patterns] if isinstance(patterns, str) else [str(p) for p in patterns]
        if not listed:
            raise ValueError(
                f"{key}=[]: it names no file; list the split's files (globs relative to "
                "dataset.root), or set it to null to find them in the Hugging Face layout."
            )
        found: list[str] = []
        for pattern in listed:
            if not any(ch in pattern for ch in "*?["):
                found.append(folder.name(pattern))  # one file, named
                continue
            if kind(folder.name(pattern)) == "http":
                raise ValueError(
                    f"{key}: {pattern!r} is a glob, and a web server cannot be listed "
                    f"(dataset.root={shown(folder.root)}): name each file."
                )
            matched = folder.glob(pattern)
            if not matched:
                raise FileNotFoundError(
                    f"{key}: no file matches {pattern!r} under dataset.root={shown(folder.root)}."
                )
            found += matched
        return named_once(found, key, listed, "file")
    every = folder.every_parquet()
    start = len(folder.root.rstrip("/")) + 1
    try:
        placed, rule = splits_of([f[start:].replace(os.sep, "/") for f in every])
    except ValueError as err:
        raise ValueError(f"dataset.root={shown(folder.root)}: {err}") from None
    mine = [f for f in every if placed.get(f[start:].replace(os.sep, "/")) == split]
    if mine:  # a link beside the file it names would be read twice, as in a listed pattern
        return named_once(mine, "dataset.root", folder.root, "file")
    words = ", ".join(f"{w}-*" for w in SPLIT_WORDS[split])
    seen = ", ".join(shown(f[start:]) for f in every[:6]) + (", ..." if len(every) > 6 else "")
    decided = (
        f"; as in Hugging Face datasets, {rule} decided the splits here, placing "
        f"{len(placed)} of its {len(every)} files in others"
        if every
        else ""
    )
    raise FileNotFoundError(
        f"dataset.root={shown(folder.root)} holds no Parquet file of the {split} split (named "
        f"{words}.parquet, or in a folder so named){f'; found {seen}' if every else ''}"
        f"{decided}. Name them with {key} (globs relative to dataset.root)."
    )


def _columns(schema: pa.Schema) -> str:
    return ", ".join(schema.names)


def check_layout(
    pf: pq.ParquetFile,
    name: str,
    size: int,
    image_column: str,
    label_column: str,
    max_group_bytes: int,
) -> Layout:
    """What the footer of the open file `name` (`size` bytes) declares, checked: the two
    columns exist with usable types, and every row group lies within the file, is at most
    `max_group_bytes` uncompressed and declares as many rows as its column chunks hold values
    (pyarrow reads the rows a row group declares and drops the rest without a word). (Its row
    counts are checked against the label column when that is read:
    engine/data/parquet/labels.py.)"""
    meta, schema = pf.metadata, pf.schema_arrow
    for key, column in (("image_column", image_column), ("label_column", label_column)):
        if column not in schema.names:
            raise ParquetFileError(
                f"dataset.{key}={column!r}: {shown(name)} has no such column; its columns: "
                f"{_columns(schema)}."
            )
        if schema.names.count(column) > 1:
            raise ParquetFileError(
                f"dataset.{key}={column!r}: {shown(name)} has {schema.names.count(column)} "
                "columns of that name, so which one is meant cannot be told: write the file "
                "again with one."
            )
    struct = image_bytes_field(schema.field(image_column).type)
    if struct is None:
        raise ParquetFileError(
            f"dataset.image_column={image_column!r}: in {shown(name)} it holds "
            f"{schema.field(image_column).type}, not encoded images (binary, or the struct "
            "{bytes, path} Hugging Face datasets writes for an Image); its columns: "
            f"{_columns(schema)}."
        )
    labels = label_kind(schema.field(label_column).type)
    if labels is None:
        raise ParquetFileError(
            f"dataset.label_column={label_column!r}: in {shown(name)} it holds "
            f"{schema.field(label_column).type}; a label is an integer, a string, or a list "
            "of them (several labels)."
        )
    rows, first = [], 0
    for g in range(meta.num_row_groups):
        group = meta.row_group(g)
        where = f"{shown(name)}: row group {g} (rows {first}-{first + group.num_rows - 1})"
        if group.num_rows < 0 or group.total_byte_size < 0:
            raise ParquetFileError(
                f"{shown(name)}: row group {g} declares {group.num_rows:,} rows of "
                f"{group.total_byte_size:,} bytes: the footer is damaged. Download or write it "
                "again."
            )
        if group.total_byte_size > max_group_bytes:
            raise ParquetFileError(
                f"{where} declares {group.total_byte_size:,} bytes of data, over "
                f"dataset.max_row_group_bytes={max_group_bytes:,}: raise it if the file is "
                "yours and the memory is there (each loader worker holds such row groups)."
            )
        for c in range(group.num_columns):
            chunk = group.column(c)
            offsets = (chunk.dictionary_page_offset, chunk.data_page_offset)
            begin = min((o for o in offsets if o), default=0)  # 0: the footer gives none
            end = begin + chunk.total_compressed_size
            if begin < 4 or end > size - FOOTER_BYTES or chunk.total_uncompressed_size < 0:
                raise ParquetFileError(
                    f"{where}: its footer places column {chunk.path_in_schema!r} at bytes "
                    f"{begin:,}-{end:,} of a {size:,}-byte file: the file is cut short or its "
                    "footer is damaged. Download or write it again."
                )
            _check_values(chunk, group.num_rows, pf.schema.column(c).max_repetition_level, where)
        rows.append(group.num_rows)
        first += group.num_rows
    if first != meta.num_rows:
        raise ParquetFileError(
            f"{shown(name)}: its footer declares {meta.num_rows:,} rows but its row groups "
            f"hold {first:,}: the footer is damaged. Download or write it again."
        )
    return Layout(name, tuple(rows), struct, labels, schema)


def _check_values(chunk: pq.ColumnChunkMetaData, rows: int, repetition: int, where: str) -> None:
    """A column chunk holds one value per row (nulls included), a list column at least one
    (an empty or null list counts one): its footer's count, as pyarrow's reader counts the
    pages. Else the row group's row count lies, and pyarrow would read that many rows."""
    values = chunk.num_values
    if values == rows or (repetition > 0 and values > rows):
        return
    held = f"at least {rows:,}" if repetition > 0 else f"{rows:,}"
    raise ParquetFileError(
        f"{where}: its footer declares {rows:,} rows, but its column chunk "
        f"{chunk.path_in_schema!r} holds {values:,} values, not {held}: the footer is damaged "
        "(pyarrow would read the rows it declares and drop the rest without a word). Download "
        "or write it again."
    )


def read_layout(
    folder: Folder, name: str, image_column: str, label_column: str, max_group_bytes: int
) -> tuple[pq.ParquetFile, Layout]:
    """Open `name` and check its footer (check_layout); any failure is a ParquetFileError
    naming the file."""
    try:
        pf, size = folder.open(name)
    except ParquetFileError:
        raise
    except ShardError as err:  # the network's, naming the URL and the fix
        raise ParquetFileError(str(err)) from err
    except (pa.ArrowException, OSError, ValueError) as err:
        reason = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise ParquetFileError(
            f"{shown(name)} cannot be read as Parquet: {shown(reason).rstrip('.')}."
        ) from err
    return pf, check_layout(pf, name, size, image_column, label_column, max_group_bytes)
