"""CSV cells a spreadsheet would run as formulas (CSV injection, OWASP's rule): every CSV the
project writes puts a `'` before a text cell that starts with `=`, `+`, `-`, `@`, a tab or a
carriage return, so a class `=HYPERLINK(...)` or a file `@SUM(1+1).jpg` opens as text. A
number (-0.5, -1, 1e-05, -inf) is no formula and stays as it is, written or read back.

The escape is undone exactly, so the project's own CSVs read back as written (a resume reads
bad_samples.csv, a sweep its summary.csv, dataset=csv a run's split.csv): a cell that starts
with `'`s before such a character gets one more `'` too, and taking one off always gives the
cell back. Only the project's own files are unescaped: its readers of the files only it
writes do so always; the listing reader (dataset=csv, predict.input), which mostly reads a
user's CSV, only when the header holds the column ESCAPED, which split.csv carries.
"""

from __future__ import annotations

import csv
import re
from collections.abc import Iterable, Iterator
from numbers import Number

TRIGGERS = ("=", "+", "-", "@", "\t", "\r")
QUOTE = "'"
# An empty column in the header of a CSV the project writes for its listing reader (split.csv):
# its cells are escaped, so read_csv_rows unescapes them. A user's listing is read as it is.
ESCAPED = "formulas_escaped"
# What Python writes for an int or a float: a spreadsheet reads it as a number, not a formula
_NUMBER = re.compile(r"-?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][-+]?[0-9]+)?|-?inf|nan")


def _formula(text: str) -> bool:
    """Whether `text`, leading quotes aside, starts like a formula (and is no number)."""
    bare = text.lstrip(QUOTE)
    return bare.startswith(TRIGGERS) and _NUMBER.fullmatch(bare) is None


def escape_cell(value: object) -> object:
    """`value` as a CSV cell: a number (or None, an empty cell) unchanged, anything else as
    text, with a `'` before it when it would start a formula."""
    if value is None or isinstance(value, Number):
        return value
    text = str(value)
    return QUOTE + text if _formula(text) else text


def unescape_cell(text: str) -> str:
    """A cell of a CSV the project wrote, as it was before `escape_cell`."""
    return text[1:] if text.startswith(QUOTE) and _formula(text) else text


def escaped(values: Iterable[object]) -> list[object]:
    """A CSV row's `values`, each through `escape_cell` (for csv.writer.writerow)."""
    return [escape_cell(v) for v in values]


def own_rows(lines: Iterable[str]) -> Iterator[dict[str, str]]:
    """The rows of a CSV the project wrote (`lines`: its open file), as csv.DictReader reads
    them, with every column name and cell unescaped."""
    reader = csv.DictReader(lines)
    if reader.fieldnames is None:  # an empty file
        return
    reader.fieldnames = [unescape_cell(name) for name in reader.fieldnames]
    for row in reader:
        yield {k: unescape_cell(v) if isinstance(v, str) else v for k, v in row.items()}
