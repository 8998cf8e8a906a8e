"""Reading back the engine's own files as hostile input, one way for all of them.

A run reads back what it wrote: a folder's lock record, fold.json, a job's metrics.json, a
cache's progress.json, a shard manifest, a checkpoint's records. Any of them may have been
edited by hand, cut short, replaced by a FIFO, or copied from elsewhere. `read_record` opens a
regular file only (never a blocking open: a FIFO would hang the job), reads at most `max_bytes`,
parses JSON with deep nesting caught (json recurses once per level), and checks the value
against a schema written as type hints: a TypedDict of fields, `list[...]`, `Literal[...]`,
unions, and the bounds the config checker reads (`Annotated[int, Bound(...)]`,
engine/core/bounds.py). What is wrong is one line: the file, the field, what it must be, and the
reader's fix. `problem` checks a value already in memory (a checkpoint's records) the same way,
and `read_table` reads a CSV the engine wrote (pipeline.csv) as typed rows checked by line.

Kept rather than pydantic (not otherwise a dependency): its strict mode would need our Bound
translated into its own constraints, and its errors are multi-line reports, where a refusal here
is one line naming the file and the fix; the checker and its fast tests for plain values (a
manifest's million labels, 300,000 pipeline.csv rows) are ~200 lines below.
"""

from __future__ import annotations

import csv
import dataclasses
import functools
import io
import json
import os
import re
import reprlib
import stat
import sys
import types
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import (
    Annotated,
    Any,
    BinaryIO,
    Literal,
    Union,
    get_args,
    get_origin,
    get_type_hints,
    is_typeddict,
)

from engine.core.bounds import FINITE, Bound

KIB = 1024


class Open:
    """Marks a TypedDict whose other keys are allowed and left unchecked: `Annotated[Metrics,
    Open()]` (a job's metrics.json holds any metric besides the fields it names)."""


class RecordError(ValueError):
    """One line: the file, what in it is wrong, and the fix."""


_KINDS = (
    (stat.S_ISFIFO, "a FIFO (named pipe)"),
    (stat.S_ISSOCK, "a socket"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISDIR, "a directory"),
)


def kind_of(mode: int) -> str:
    """What a file of `mode` is, in words (for one that is not a regular file)."""
    return next((name for test, name in _KINDS if test(mode)), "not a regular file")


def _unopened(path: str | os.PathLike[str], err: OSError) -> str:
    """Why `path` did not open, in words: what it is, or the system's reason."""
    try:
        return f"it is {kind_of(os.stat(path).st_mode)}"
    except OSError:
        return f"it cannot be opened ({err.strerror or err})"


def _opened(path: str | os.PathLike[str], what: str) -> tuple[int, os.stat_result]:
    """A descriptor of the regular file `path` and its stat; anything else raises ValueError
    `it is a FIFO (named pipe), not <what>` before a blocking open (O_NONBLOCK returns at once
    on a FIFO with no writer, and a regular file ignores it). A missing file is
    FileNotFoundError."""
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0)
    try:
        fd = os.open(path, flags | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        raise
    except OSError as err:  # a socket (ENXIO), a loop of links (ELOOP), no permission
        raise ValueError(f"{_unopened(path, err)}, not {what}") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise ValueError(f"it is {kind_of(info.st_mode)}, not {what}")
    except BaseException:
        os.close(fd)
        raise
    return fd, info


def open_regular(path: str | os.PathLike[str], what: str, buffering: int = -1) -> BinaryIO:
    """The regular file `path`, open for reading as a stream (see `_opened`)."""
    fd, _ = _opened(path, what)
    os.set_blocking(fd, True)  # O_NONBLOCK served the open only
    return os.fdopen(fd, "rb", buffering=buffering)


def regular_file_bytes(
    path: str | os.PathLike[str], max_bytes: int | None, what: str, limit: str = ""
) -> bytes:
    """The bytes of the regular file `path` (see `_opened`: one open and one fstat, as a plain
    read costs, for every image a worker reads); a file over `max_bytes` raises ValueError `it
    is N bytes, more than <limit>` (by default `<what> holds`) before it is read, so /dev/zero
    or a 50 GB file is never read into memory."""
    fd, info = _opened(path, what)
    with os.fdopen(fd, "rb") as f:
        if max_bytes is not None and info.st_size > max_bytes:
            limit = limit or f"{what} holds"
            raise ValueError(
                f"it is {info.st_size:,} bytes, more than {limit} ({max_bytes:,} bytes)"
            )
        data = f.read(info.st_size + 1)  # one byte past fstat's size tells a growing file
    if len(data) > info.st_size:
        raise ValueError("it grew while it was read (is another process writing it?)")
    return data


def parse_json(data: bytes) -> Any:
    """`data` as JSON; ValueError `is not JSON (why)` for bad syntax, bytes that are not UTF-8,
    or nesting past the interpreter's stack ([[[[...]]]] 200,000 deep)."""
    try:
        return json.loads(data)
    except RecursionError:
        raise ValueError("it is not JSON (nested too deeply)") from None
    except ValueError as err:
        raise ValueError(f"it is not JSON ({str(err)[:80]})") from None  # one line: json's


def parse_record(data: bytes, schema: Any, source: str, fix: str) -> Any:
    """`data` parsed as JSON and checked against `schema`, else RecordError
    `<source>: <why>: <fix>`."""
    try:
        value = parse_json(data)
    except ValueError as err:
        raise RecordError(f"{source}: {err}: {fix}") from None
    why = problem(value, schema)
    if why is not None:
        raise RecordError(f"{source}: {why}: {fix}")
    return value


def _record_bytes(path: str | Path, max_bytes: int, what: str, fix: str) -> bytes:
    """`regular_file_bytes`, any failure but a missing file as RecordError `<path>: <why>:
    <fix>`; a missing file is FileNotFoundError, for the caller to decide."""
    try:
        return regular_file_bytes(path, max_bytes, what)
    except FileNotFoundError:
        raise
    except OSError as err:  # unreadable, a link to nothing
        raise RecordError(f"{path}: it cannot be read ({err.strerror}): {fix}") from None
    except ValueError as err:
        raise RecordError(f"{path}: {err}: {fix}") from None


def read_record(path: str | Path, schema: Any, max_bytes: int, what: str, fix: str) -> Any:
    """The JSON file `path` (at most `max_bytes`, a regular file), checked against `schema`;
    else RecordError `<path>: <why>: <fix>`. `what` names the file in words (`a fold.json`).
    A missing file is FileNotFoundError, for the caller to decide."""
    return parse_record(_record_bytes(path, max_bytes, what, fix), schema, str(path), fix)


def read_table(
    path: str | Path, row: Any, max_bytes: int, what: str, fix: str
) -> Iterator[tuple[int, dict[str, Any]]]:
    """(line, row) of each row of the CSV file `path` (a regular file of at most `max_bytes`),
    its cells typed by the TypedDict `row` (a number column's empty cell is None; a number is
    ASCII digits as Python writes them, not `٣` or `1_000`) and checked against it; else
    RecordError `<path> line <n>: <why>: <fix>`. A header naming a column twice, a row of more
    or fewer cells than columns, and an unclosed quote are refused; a UTF-8 byte order mark
    (a spreadsheet's save) is passed over. A missing file is FileNotFoundError."""
    data = _record_bytes(path, max_bytes, what, fix)
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as err:
        raise RecordError(f"{path}: byte {err.start} is not UTF-8: {fix}") from None
    hints = _hints(row)
    reader = csv.DictReader(io.StringIO(text, newline=""), strict=True)
    try:
        header = reader.fieldnames or []
        twice = next((name for i, name in enumerate(header) if name in header[:i]), None)
        if twice is not None:
            raise RecordError(f"{path} line 1: its header names {_short(twice)} twice: {fix}")
        bases = {name: _number_kind(hints.get(name, str)) for name in header}
        for cells in reader:
            if None in cells:
                why: str | None = "it has more cells than columns"
            elif None in cells.values():
                why = "it has fewer cells than columns"
            else:
                typed = {k: _cell(v, bases[k]) for k, v in cells.items()}
                why = problem(typed, row)
            if why is not None:
                raise RecordError(f"{path} line {reader.line_num}: {why}: {fix}")
            yield reader.line_num, typed
    except csv.Error as err:
        raise RecordError(f"{path} line {reader.line_num + 1}: not CSV ({err}): {fix}") from None


INT = re.compile(r"[-+]?[0-9]+")
FLOAT = re.compile(
    r"[-+]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][-+]?[0-9]+)?|[-+]?(inf|infinity|nan)", re.I
)


def _number_kind(hint: Any) -> type | None:
    """int or float where a column's `hint` names one (bounded, or in a union), else None."""
    return next((t for t in (int, float) if _names(hint, t)), None)


def _cell(text: str, base: type | None) -> Any:
    """A CSV cell as its column's number kind `base`: a number (None when empty), else the
    text; one that is no number as Python writes it stays text, for `problem` to name."""
    if base is None:
        return text
    if text == "":
        return None
    if (INT if base is int else FLOAT).fullmatch(text) is None:
        return text
    try:
        return base(text)
    except ValueError:  # past int()'s 4,300 digits
        return text


def _names(hint: Any, kind: type) -> bool:
    """Whether `hint` (bounded, or in a union) is `kind`."""
    if get_origin(hint) in (Annotated, Union, types.UnionType):
        return any(_names(arg, kind) for arg in get_args(hint))
    return hint is kind


def problem(value: Any, schema: Any, field: str = "") -> str | None:
    """Why `value` is not a `schema` (`its fold is 7, not an int >= 0 and <= 4`), or None.
    Strict: a bool is no int, an int passes for a float, a JSON array for a tuple."""
    origin, args = get_origin(schema), get_args(schema)
    if origin is Annotated:
        if any(isinstance(m, Open) for m in schema.__metadata__):
            if not isinstance(value, dict):
                return _not(value, schema, field)
            return _fields_problem(value, args[0], field, closed=False)
        bound = next((m for m in schema.__metadata__ if isinstance(m, Bound)), None)
        found = problem(value, args[0], field)
        if bound is not None and (found is not None or not bound.admits(value)):
            return _not(value, schema, field)  # a bounded number: say the bound too
        return found
    if is_typeddict(schema) or dataclasses.is_dataclass(schema):
        return _fields_problem(value, schema, field, closed=True)
    if origin in (Union, types.UnionType):
        fits = any(problem(value, arg, field) is None for arg in args)
        return None if fits else _not(value, schema, field)
    if origin in (list, tuple) or schema in (list, tuple):
        return _items_problem(value, schema, field)
    if origin is dict:
        if not isinstance(value, dict):
            return _not(value, schema, field)
        for key, item in value.items():
            found = problem(key, args[0], f"{field} key") or problem(
                item, args[1], f"{field}[{_short(key)}]"
            )
            if found is not None:
                return found
        return None
    return None if _is(value, schema) else _not(value, schema, field)


def _is(value: Any, schema: Any) -> bool:
    plain = _PLAIN.get(None if schema is type(None) else schema)
    if plain is not None:
        return plain(value)
    if schema is Any:
        return True
    if get_origin(schema) is Literal:
        return any(value == arg and type(value) is type(arg) for arg in get_args(schema))
    return isinstance(value, schema)


def _fields_problem(value: Any, schema: Any, field: str, closed: bool) -> str | None:
    """A TypedDict's (or a dataclass's) fields as a JSON object: the required ones there (a
    dataclass's fields without a default), each of its type; no others when closed."""
    if not isinstance(value, dict):
        return _not(value, schema, field)
    missing = [key for key in _required(schema) if key not in value]
    if missing:
        return f"{_its(field) or 'it'} lacks {', '.join(sorted(missing))}"
    hints = _hints(schema)
    extra = [key for key in value if key not in hints]
    if closed and extra:
        more = f" and {len(extra) - 5:,} more" if len(extra) > 5 else ""
        shown = ", ".join(_short(key) for key in extra[:5])
        return f"{_its(field) or 'it'} has fields it never holds: {shown}{more}"
    tests = _field_tests(schema)
    if tests is not None and all(test(value[k]) for k, test in tests.items() if k in value):
        return None  # 300,000 pipeline.csv rows: one plain test per cell, not a walk
    for key, hint in hints.items():
        if key in value:
            found = problem(value[key], hint, f"{field}.{key}" if field else key)
            if found is not None:
                return found
    return None


@functools.cache
def _hints(schema: Any) -> dict[str, Any]:
    """A record's fields and their hints, evaluated once (get_type_hints re-evaluates the
    string annotations of every call: a manifest of 10,000 entries paid it 10,000 times)."""
    return get_type_hints(schema, include_extras=True)


@functools.cache
def _required(schema: Any) -> list[str]:
    if is_typeddict(schema):
        return list(schema.__required_keys__)
    empty = dataclasses.MISSING
    fields = dataclasses.fields(schema)
    return [f.name for f in fields if f.default is empty and f.default_factory is empty]


def _items_problem(value: Any, schema: Any, field: str) -> str | None:
    """A list (or a tuple, which JSON writes as a list): each item, or each position."""
    args = get_args(schema)
    if not isinstance(value, list | tuple):
        return _not(value, schema, field)
    fixed = get_origin(schema) is tuple and args and args[-1] is not Ellipsis
    if fixed and len(value) != len(args):
        return _not(value, schema, field)
    test = _scalar_test(args[0]) if args and not fixed else None
    if test is not None:  # a million labels: one pass of a plain test, not a million walks
        bad = next((i for i, item in enumerate(value) if not test(item)), None)
        return None if bad is None else problem(value[bad], args[0], f"{field}[{bad}]")
    for index, item in enumerate(value):
        hint = args[index] if fixed else (args[0] if args else Any)
        found = problem(item, hint, f"{field}[{index}]")
        if found is not None:
            return found
    return None


_FLOAT_MAX = sys.float_info.max
_PLAIN: dict[Any, Callable[[Any], bool]] = {  # the plain types' tests (of _is and the fast path)
    int: lambda v: isinstance(v, int) and not isinstance(v, bool),
    float: lambda v: (  # an int too large for a float (10**600) is none
        isinstance(v, float)
        or (isinstance(v, int) and not isinstance(v, bool) and -_FLOAT_MAX <= v <= _FLOAT_MAX)
    ),
    str: lambda v: isinstance(v, str),
    bool: lambda v: isinstance(v, bool),
    None: lambda v: v is None,
}


@functools.cache
def _scalar_test(schema: Any) -> Callable[[Any], bool] | None:
    """A fast test for a value of a plain scalar type, bounded or not, or a union of such and
    None (None: no fast test; `problem` walks it)."""
    origin = get_origin(schema)
    if origin in (Union, types.UnionType):
        tests = [_scalar_test(arg) for arg in get_args(schema)]
        if any(test is None for test in tests):
            return None
        return lambda v: any(test(v) for test in tests)  # type: ignore[misc]
    bound = None
    if origin is Annotated:
        schema, *meta = get_args(schema)
        bound = next((m for m in meta if isinstance(m, Bound)), None)
        if bound is None:
            return None
    plain = _PLAIN.get(None if schema is type(None) else schema)
    if plain is None or bound is None:
        return plain
    admits = bound.admits
    return lambda v: plain(v) and admits(v)


@functools.cache
def _field_tests(schema: Any) -> dict[str, Callable[[Any], bool]] | None:
    """Fast tests of every field of `schema` when each has one (None: walk it)."""
    tests = {key: _scalar_test(hint) for key, hint in _hints(schema).items()}
    return None if any(t is None for t in tests.values()) else tests  # type: ignore[misc]


def _its(field: str) -> str:
    return f"its {field}" if field else ""


_SHORT = reprlib.Repr()  # keyword arguments only from Python 3.12
_SHORT.maxlevel, _SHORT.maxstring, _SHORT.maxother, _SHORT.maxlong = 3, 40, 40, 40
_SHORT.maxlist = _SHORT.maxtuple = _SHORT.maxdict = _SHORT.maxset = 4


def _short(value: Any) -> str:
    """`value` as repr writes it, at most ~60 characters on one line, however deep or long
    (a checkpoint value nested 100,000 deep once failed inside repr)."""
    text = _SHORT.repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _not(value: Any, schema: Any, field: str) -> str:
    """`its fold is 7, not an int >= 0`; the value cut short (`_short`)."""
    return f"{_its(field) or 'it'} is {_short(value)}, not {words(schema)}"


def words(schema: Any) -> str:
    """What a value of `schema` is, as a reader says it: `an int >= 1`, `a list of strings`."""
    origin, args = get_origin(schema), get_args(schema)
    if origin is Annotated:
        if any(isinstance(m, Open) for m in schema.__metadata__):
            return "an object"
        bound = next((m for m in schema.__metadata__ if isinstance(m, Bound)), None)
        if bound == FINITE:
            return "a finite number"
        return words(args[0]) + (f" {bound.words()}" if bound else "")
    if origin in (Union, types.UnionType):  # an int is a number too: said once
        kinds = [arg for arg in args if not (arg is int and float in args)]
        return " or ".join(words(arg) for arg in kinds)
    if origin is Literal:
        return " or ".join(json.dumps(arg) for arg in args)
    if origin is list or schema is list:
        return f"a list of {_plural(args[0]) if args else 'values'}"
    if origin is tuple:
        return f"a list of {len(args)}: {', '.join(words(arg) for arg in args)}"
    if origin is dict:
        return f"an object of {_plural(args[1])}"
    if is_typeddict(schema) or dataclasses.is_dataclass(schema):
        return f"an object of {', '.join(_hints(schema))}"
    return _NAMES.get(schema, f"a {getattr(schema, '__name__', schema)}")


_NAMES = {
    int: "an int",
    float: "a number",
    str: "a string",
    bool: "true or false",
    None: "null",
    type(None): "null",
    Any: "a value",
}


def _plural(schema: Any) -> str:
    text = words(schema)
    for article in ("an ", "a "):
        if text.startswith(article):
            head, _, rest = text[len(article) :].partition(" ")
            return f"{head}s {rest}".rstrip()
    return text
