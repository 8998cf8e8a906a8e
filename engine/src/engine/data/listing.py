"""A listing of samples: CSV rows read strictly, paths kept inside the dataset root, and the
class list from labels (names, or integers that index the classes). Every class name of every
dataset kind enters through `class_name` (a label, a folder's name) or `unique_classes` (a
given list), so all kinds spell, check and compare names alike.

Every problem is one error naming the file and line, and the fix.
"""

from __future__ import annotations

import codecs
import csv
import logging
import os
import re
import stat
import unicodedata
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

from engine.core.csv_cells import ESCAPED, unescape_cell
from engine.core.text import first_few
from engine.data.targets import LABEL_SEPARATOR

INTEGER = re.compile(r"-?[0-9]+")  # ASCII digits only: '²'.isdigit() is True, int('²') fails
MIN_USED_IDS = 0.5  # integer labels using fewer of the ids 0..max than this are refused
# characters no class name may hold (by Unicode category): control characters and line breaks
# break the line of every log, report and CSV cell the name goes into; format characters (a
# zero-width space, a right-to-left override) print as nothing, so `cat` and `cat` + U+200B
# would be two classes that read alike, and U+202E shows `tac` as `cat`
REFUSED_CHARACTERS = {
    "Cc": "a control character",
    "Zl": "a line break",
    "Zp": "a line break",
    "Cf": "an invisible format character",
}
# format characters that spell words: ZWNJ and ZWJ join or part letters in Persian, Arabic and
# Indic scripts (and emoji), so a name that needs them keeps them
JOINERS = {"\u200c", "\u200d"}
SHOWN_CLASSES = 10  # class names a message lists before "..."

log = logging.getLogger(__name__)


def _within(top: str, path: str) -> bool:
    """Whether the normalised absolute `path` is `top` or below it (a string test: the same
    answer as os.path.commonpath, at a fraction of its cost per row)."""
    return path == top or path.startswith(top if top.endswith(os.sep) else top + os.sep)


class RootGuard:
    """Keeps listed paths inside the dataset root, symlinks resolved: a path may not leave it
    lexically (`..`, absolute elsewhere, `~`), through a linked folder (each folder's real
    path is resolved once) or, when files are checked, through a linked file."""

    def __init__(self, base: Path, path_column: str) -> None:
        self.top = os.path.abspath(base)
        self.real_top = os.path.realpath(base)
        self.path_column = path_column
        # folder -> its real path when that leaves the root, else None (resolved once each)
        self._escapes: dict[str, str | None] = {}

    def _outside(self, where: str, raw: str, how: str) -> ValueError:
        return ValueError(
            f"{where}: {raw!r} (column {self.path_column!r}) {how} outside the dataset root "
            f"{self.top} (dataset.root; null = the CSV's folder). List paths relative to the "
            "root, or set dataset.root to a folder that really contains every file."
        )

    def _inside_real(self, real: str) -> bool:
        return _within(self.real_top, real)

    def resolve(self, raw: str, where: str, check_file: bool) -> str:
        """`raw` joined to the root and normalised; an error names the line if it leaves the
        root or (with `check_file`) does not exist. Nothing is read to decide."""
        if "\0" in raw:
            raise ValueError(
                f"{where}: {raw!r} (column {self.path_column!r}) holds a NUL byte, which no file "
                "name can: fix the row."
            )
        path = os.path.normpath(os.path.join(self.top, raw))
        if raw.startswith("~") or not _within(self.top, path):
            raise self._outside(where, raw, "points")
        folder = os.path.dirname(path)
        if folder not in self._escapes:
            real = os.path.realpath(folder)
            self._escapes[folder] = None if self._inside_real(real) else real
        if self._escapes[folder] is not None:
            raise self._outside(
                where, raw, f"leads (through a symlink, to {self._escapes[folder]})"
            )
        if check_file:
            try:
                is_link = stat.S_ISLNK(os.lstat(path).st_mode)
            except FileNotFoundError:
                raise FileNotFoundError(
                    f"{where}: {path} does not exist (column {self.path_column!r}, resolved "
                    f"against {self.top}; set dataset.root if the paths are relative to another "
                    "folder)."
                ) from None
            if is_link and not self._inside_real(real := os.path.realpath(path)):
                raise self._outside(where, raw, f"leads (through a symlink, to {real})")
        return path


def _bad_encoding(csv_path: Path, encoding: str) -> ValueError:
    """The first line of `csv_path` that is not valid `encoding`, as one error with the fix."""
    for number, raw in enumerate(csv_path.read_bytes().splitlines(), 1):
        try:
            raw.decode(encoding)
        except UnicodeDecodeError as err:
            return ValueError(
                f"{csv_path}:{number}: not valid {encoding} text (byte {raw[err.start]:#04x} "
                f"at column {err.start + 1}); save the file as UTF-8, or set "
                "dataset.csv_encoding to the encoding it was written in (e.g. latin-1, cp1252)."
            )
    return ValueError(
        f"{csv_path}: not valid {encoding} text; save the file as UTF-8, or set "
        "dataset.csv_encoding to the encoding it was written in (e.g. utf-16, latin-1)."
    )


def read_csv_rows(
    csv_path: Path, columns: dict[str, str], encoding: str
) -> Iterator[tuple[int, tuple[str, ...]]]:
    """(line number, the values of `columns` (config key, e.g. dataset.path_column -> column
    name) in their order) for each row of
    `csv_path`, read as they are consumed (no row is kept); checks that the columns exist and
    that every row parses and has no more fields than the header. A missing field reads "",
    an empty line is skipped. A file the project wrote (its header holds ESCAPED: split.csv)
    has the `'` taken off the cells it escaped; a user's file is read as it is."""
    if not csv_path.is_file():
        raise FileNotFoundError(f"{csv_path} does not exist (set by dataset.train_csv/val_csv/csv)")
    # utf-8-sig reads a file with or without the byte-order mark Excel writes
    codec = "utf-8-sig" if codecs.lookup(encoding).name == "utf-8" else encoding
    line = 1
    try:
        with open(csv_path, newline="", encoding=codec) as f:
            reader = csv.reader(f, strict=True)  # strict: an unclosed quote is an error
            header = next(reader, [])
            own = ESCAPED in header  # written by the project (engine/core/csv_cells.py)
            if own:
                header = [unescape_cell(name) for name in header]
            for key, column in columns.items():
                if column not in header:
                    raise ValueError(
                        f"{csv_path}:1: no column {column!r} ({key}); columns found: "
                        f"{header}. Set {key} to one of them."
                    )
                places = [i + 1 for i, name in enumerate(header) if name == column]
                if len(places) > 1:
                    raise ValueError(
                        f"{csv_path}:1: column {column!r} ({key}) is in the header "
                        f"{len(places)} times (columns {', '.join(map(str, places))}); rename or "
                        "remove all but one, so that it is clear which one to read."
                    )
            position = {name: i for i, name in enumerate(header)}  # the columns read: unique
            wanted = [position[column] for column in columns.values()]
            for fields in reader:
                line = reader.line_num
                if not fields:
                    continue
                if len(fields) > len(header):
                    raise ValueError(
                        f"{csv_path}:{line}: {len(fields)} fields, the header has "
                        f"{len(header)}; quote fields that contain a comma."
                    )
                values = tuple(fields[i] if i < len(fields) else "" for i in wanted)
                yield line, tuple(map(unescape_cell, values)) if own else values
    except UnicodeDecodeError:
        raise _bad_encoding(csv_path, codec) from None
    except csv.Error as err:
        raise ValueError(
            f"{csv_path}:{line + 1}: {err}; check the quoting of that row (an unclosed quote "
            "makes the rest of the file one field)."
        ) from None


def listed(names: Sequence[str]) -> str:
    """`names` for a message: the first SHOWN_CLASSES, then the count (a list of 100,000 classes
    would make a line of megabytes)."""
    return f"[{first_few(names, SHOWN_CLASSES, repr, ',')}]"


def class_name(raw: str, where: Callable[[], str], fix: str) -> str:
    """`raw` (a label, a class folder's name or a listed class) as a class name: in Unicode NFC;
    refused if it is empty (or only spaces) or holds a control character (anywhere: a tab at
    the edge is refused, not stripped), a line break or a format character, in one line naming
    `where()` (the file and line, or the folder, or the item, with the config key) and `fix`.

    Why NFC and not a refusal: `café` typed with one code point for `é` (as keyboards give it)
    and with `e` and a combining accent (as macOS names files, and some exports write) print
    alike, and whoever wrote them meant one class. A refusal would send them to rewrite files or
    rename folders that their tools may write back decomposed; so both are one class, named in
    NFC in the checkpoint and every report (engine/docs/datasets.md). Only names change: a file or
    folder is always opened as it is spelled."""
    if not raw.isprintable():  # the fast path: most names are printable
        for char in raw:
            what = REFUSED_CHARACTERS.get(unicodedata.category(char))
            if what is not None and char not in JOINERS:
                raise ValueError(
                    f"{where()}: class name {raw!r} holds {what} (U+{ord(char):04X}), which no "
                    f"log or report can show; {fix}."
                )
    if not raw.strip():  # "" or spaces: a class no report can name
        raise ValueError(f"{where()}: an empty class name ({raw!r}); {fix}.")
    return unicodedata.normalize("NFC", raw)


def refuse_separator(
    names: Sequence[str], at: Callable[[int], str], key: str | None = None
) -> None:
    """Refuse a multi-label class whose name holds LABEL_SEPARATOR (`at(i)`: where name i comes
    from; `key`: the config key that reads it, unless `at` names it): reports and
    predictions.csv join a sample's classes with it, so `a|b` would read back as two classes.
    Refused as the class list is built, not by the first report after training. (A
    single-label sample has one class: there `|` is an ordinary character.)"""
    for i, name in enumerate(names):
        if LABEL_SEPARATOR in name:
            read_by = f" ({key})" if key else ""
            raise ValueError(
                f"{at(i)}: class {name!r}{read_by} holds {LABEL_SEPARATOR!r}, which joins a "
                "multi-label sample's classes in reports and predictions.csv, so it would read as "
                f"{len(name.split(LABEL_SEPARATOR))} classes: rename the class (e.g. "
                f"{name.replace(LABEL_SEPARATOR, '_')!r})."
            )


def class_list(
    labels: Sequence[str], where: Callable[[int], str], key: str, multi_label: bool = False
) -> list[str]:
    """Class names from the labels of the samples (`where(i)`: the location of the i-th, `key`:
    the column or field and its config key, for errors), each label already a `class_name`:
    names are sorted; integer labels keep
    their value as index (refused when they leave most of the ids 0..max unused, logged when
    they skip some); a mix of both is refused (it would renumber every class). `multi_label`:
    names holding LABEL_SEPARATOR are refused (refuse_separator)."""
    distinct = set(labels)
    integers = {v for v in distinct if INTEGER.fullmatch(v)}
    if not integers:
        names = sorted(distinct)
        if multi_label:
            refuse_separator(names, lambda k: where(list(labels).index(names[k])), key)
        return names
    if integers != distinct:
        odd = next(i for i, v in enumerate(labels) if v not in integers)
        first = next(i for i, v in enumerate(labels) if v in integers)
        raise ValueError(
            f"{where(odd)}: label {labels[odd]!r} ({key}) is not a plain integer (ASCII digits), "
            f"but label {labels[first]!r} at {where(first)} is: integers index the classes, "
            "names are sorted into a class list, so a mix would renumber every class. Write "
            "every label as an integer, or every label as a name (e.g. 'id2' for 2)."
        )
    used = sorted({int(v) for v in distinct})
    if used[0] < 0:
        first = next(i for i, v in enumerate(labels) if int(v) < 0)
        raise ValueError(
            f"{where(first)}: negative label {labels[first]}; integer labels count from 0."
        )
    top = used[-1]
    if len(used) < MIN_USED_IDS * (top + 1):
        first = next(i for i, v in enumerate(labels) if int(v) == top)
        shown = ", ".join(map(str, used[:8])) + (", ..." if len(used) > 8 else "")
        raise ValueError(
            f"{where(first)}: integer label {top} makes {top + 1} classes, but only {len(used)} "
            f"of the ids 0..{top} occur ({shown}): the model would get an output per unused "
            "id. Renumber the labels 0..K-1, or write them as names (e.g. 'id99')."
        )
    if len(used) < top + 1:
        missing = sorted(set(range(top + 1)) - set(used))
        log.warning(
            "integer labels 0..%d: %d ids have no samples (e.g. %s), yet each is a class "
            "(the model outputs one score per id)",
            top,
            len(missing),
            missing[:5],
        )
    return [str(i) for i in range(top + 1)]


def unique_classes(
    classes: Sequence[str],
    key: str = "dataset.classes",
    multi_label: bool = False,
    at: Callable[[int], str] | None = None,
) -> list[str]:
    """A given class list (`key`: dataset.classes, the train split's, or a list a file holds;
    `at(i)`: where its i-th name is, by default `key[i]`) as class names (`class_name`: NFC),
    each once and at least one: an empty list would make a model with no outputs (multi-label,
    a NaN loss that names nothing), a repeat an output no sample can be labelled with.
    `multi_label`: no name may hold LABEL_SEPARATOR (refuse_separator). Linear in the names (a
    scan of the names before each took ~36 s for 100,000 classes, paid again by each split)."""
    if isinstance(classes, str):
        raise ValueError(f"{key}={classes!r}: expected a list of class names, e.g. [cat,dog].")
    place = at or (lambda i: f"{key}[{i}]")
    raw = [str(c) for c in classes]
    names = [
        class_name(name, lambda i=i: place(i), f"fix the name in {key}")
        for i, name in enumerate(raw)
    ]
    if not names:
        raise ValueError(
            f"{key}=[]: no class names, so the model would have no outputs (multi-label data "
            "ends in a NaN loss): list the classes, e.g. [cat,dog], or leave them out (null) to "
            "take them from the labels."
        )
    first: dict[str, int] = {}
    for i, name in enumerate(names):
        j = first.setdefault(name.strip(), i)  # `cat` and `cat ` print alike: one name
        if j != i:
            alike = (
                f" ({raw[j]!a} and {raw[i]!a} differ only in spaces at their ends)"
                if names[j] != name
                else f" ({raw[j]!a} and {raw[i]!a} are one name in Unicode NFC)"
                if raw[j] != raw[i]
                else ""
            )
            raise ValueError(
                f"{place(i)}: {name!r} is listed twice in {key}={listed(names)} (also item "
                f"{j}){alike}: a repeat would be an output no sample has; list each class once."
            )
    if multi_label:
        refuse_separator(names, place)
    return names


def outside(classes: Sequence[str], fixed_by: str | None) -> str:
    """The end of the one line that refuses a label outside `classes`: fixed by the key
    `fixed_by` (dataset.classes), or (None) the train split's, with the fix for each."""
    if fixed_by is not None:
        return (
            f"is not in {fixed_by}={listed(classes)}. Fix the row, or add the class to {fixed_by}."
        )
    return (
        f"is not a train class {listed(classes)}. Fix the row, or add the class to the train split."
    )
