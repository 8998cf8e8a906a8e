"""CSV injection (OWASP): every CSV writer of the engine puts a `'` before a text cell that a
spreadsheet would run as a formula, leaves numbers alone, and its readers of its own files
take exactly that `'` off again; a user's listing is read as it is."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from engine.core.csv_cells import ESCAPED, escape_cell, unescape_cell
from engine.core.io import write_csv
from engine.data.bad_samples import BadSample, BadSampleLedger
from engine.data.listing import read_csv_rows
from engine.runs.loggers.base import RunContext
from engine.runs.loggers.metrics_csv import CsvLogger
from engine.sweeps.table import append_row, read_rows, write_rows

TRIGGERS = ("=", "+", "-", "@", "\t", "\r")
# text a spreadsheet would run, and text that only looks escaped already
HOSTILE = ["=1+2", "@SUM(1+1)", "+cmd", "-2+3", "\tx", "\rx", "=", "'=x", "''@x", "'-1+2"]
HARMLESS = ["", "cat", "'quoted", "'-1", "1+1", "a=b", "-1", "-0.5", "1e-05", "-inf", "nan"]


def _cells(path: Path) -> list[str]:
    with open(path, newline="", encoding="utf-8", errors="surrogateescape") as f:
        return [cell for row in csv.reader(f) for cell in row]


def _live(cells: list[str]) -> list[str]:
    """The cells a spreadsheet would run as a formula: text (not a number) after a trigger."""

    def number(cell: str) -> bool:
        try:
            float(cell)
        except ValueError:
            return False
        return True

    return [c for c in cells if c.startswith(TRIGGERS) and not number(c)]


@pytest.mark.parametrize("text", HOSTILE + HARMLESS)
def test_a_cell_is_escaped_only_when_it_would_run_and_reads_back_exactly(text: str) -> None:
    cell = escape_cell(text)
    assert isinstance(cell, str) and not _live([cell])
    assert cell == ("'" + text if text in HOSTILE else text)
    assert unescape_cell(cell) == text


def test_numbers_are_not_text_and_stay_as_they_are() -> None:
    for number in (-0.5, -1, 0, 2.5e-7, float("-inf"), True, None):
        assert escape_cell(number) is number


def test_write_csv_escapes_the_header_and_cells_but_not_numbers(tmp_path: Path) -> None:
    classes = ["=1+2", "@SUM(1+1)", "-minus"]
    rows = [{"true \\ predicted": name} | dict.fromkeys(classes, -3) for name in classes]
    write_csv(tmp_path / "confusion.csv", ["true \\ predicted", *classes], rows)
    write_csv(tmp_path / "hardest.csv", ["path", "loss"], [{"path": "=x.jpg", "loss": -0.5}])
    cells = _cells(tmp_path / "confusion.csv") + _cells(tmp_path / "hardest.csv")
    assert not _live(cells)
    assert {"'=1+2", "'@SUM(1+1)", "'-minus", "'=x.jpg", "-3", "-0.5"} <= set(cells)


def test_the_listing_reader_unescapes_the_projects_split_csv_only(tmp_path: Path) -> None:
    own, user = tmp_path / "split.csv", tmp_path / "mine.csv"
    rows = [{"path": "=x.jpg", "label": "@a", "split": "train"}, {"path": "-1", "label": "'=b"}]
    write_csv(own, ["path", "label", "split", ESCAPED], rows)
    user.write_text("path,label\n'=x.jpg,'@a\n-1,''=b\n")
    columns = {"dataset.path_column": "path", "dataset.label_column": "label"}
    assert not _live(_cells(own))
    read = [values for _, values in read_csv_rows(own, columns, "utf-8")]
    assert read == [("=x.jpg", "@a"), ("-1", "'=b")]  # exactly as written
    mine = [values for _, values in read_csv_rows(user, columns, "utf-8")]
    assert mine == [("'=x.jpg", "'@a"), ("-1", "''=b")]  # the user's text, untouched


def test_bad_samples_csv_is_escaped_and_a_resumed_ledger_lists_a_file_once(tmp_path: Path) -> None:
    report = tmp_path / "bad_samples.csv"
    bad = BadSample(3, "=x.jpg\udcff", "@SUM(1+1)", "-error: truncated")
    BadSampleLedger("train", 100, 1.0, report).record([bad])
    BadSampleLedger("train", 100, 1.0, report).record([bad])  # the run resumed in its dir
    cells = _cells(report)
    assert not _live(cells) and "'=x.jpg\udcff" in cells
    assert len(cells) == 2 * 5  # the header and one row: the path read back as it was


def test_a_sweep_table_reads_back_exactly_through_appends_and_rewrites(tmp_path: Path) -> None:
    table = tmp_path / "summary.csv"
    columns = ["job", "status", "overrides", "val/loss"]
    append_row(table, columns, {"job": 0, "status": "ok", "overrides": "+x=-1", "val/loss": -0.5})
    append_row(table, columns, {"job": 1, "status": "ok", "overrides": "'+x=@", "val/loss": 2})
    rows = read_rows(table)
    assert [r["overrides"] for r in rows] == ["+x=-1", "'+x=@"]
    write_rows(table, columns, rows)  # rewritten from what was read: escaped once, no more
    assert read_rows(table) == rows
    cells = _cells(table)
    assert not _live(cells) and {"'+x=-1", "''+x=@", "-0.5"} <= set(cells)


def test_metrics_csv_escapes_a_metric_key(tmp_path: Path) -> None:
    context = RunContext(out=tmp_path, start_step=0, cfg=None, config={}, params={})  # type: ignore[arg-type]
    logger = CsvLogger(context)
    logger.scalars({"=key": -0.5, "val/loss": 1.0}, step=1)
    logger.close()
    cells = _cells(tmp_path / "metrics.csv")
    assert not _live(cells) and {"'=key", "-0.5"} <= set(cells)
