"""Unreadable samples under `dataset.decode.on_error=skip`: the record a dataset returns instead of
a sample, and the per-split ledger that logs each bad file once, lists it in `bad_samples.csv`
and stops the run past `dataset.decode.max_bad_fraction` (the loader's last stage:
engine/data/batch_stages.py; the workers' collate sets the records apart).
"""

from __future__ import annotations

import csv
import logging
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

from engine.core.csv_cells import escaped, own_rows
from engine.core.text import shown

log = logging.getLogger(__name__)

ON_ERROR = ("raise", "skip")
REPORT_NAME = "bad_samples.csv"
REPORT_COLUMNS = ("split", "index", "path", "label", "error")
# A file name that is not valid UTF-8 is written byte for byte (so a script can still act on
# it, e.g. delete it) instead of failing the write; it is read back the same way on resume.
# Cells that would start a spreadsheet formula get a `'`, taken off again when read back.
REPORT_TEXT = {"encoding": "utf-8", "errors": "surrogateescape", "newline": ""}


class BadDataError(RuntimeError):
    """More samples of a split are unreadable than `dataset.decode.max_bad_fraction` allows."""


def check_policy(on_error: str, max_bad_fraction: float) -> None:
    """Validate `dataset.decode.on_error` and `dataset.decode.max_bad_fraction`; the error names the key."""
    if on_error not in ON_ERROR:
        raise ValueError(
            f"dataset.decode.on_error={on_error!r}: expected one of {ON_ERROR} (raise = stop at the "
            f"first unreadable file; skip = leave such files out and list them in {REPORT_NAME})."
        )
    number = isinstance(max_bad_fraction, (int, float)) and not isinstance(max_bad_fraction, bool)
    if not number or not 0 <= max_bad_fraction <= 1:
        raise ValueError(
            f"dataset.decode.max_bad_fraction={max_bad_fraction!r}: expected a number in [0, 1], the "
            "share of a split's samples that may be unreadable with dataset.decode.on_error=skip."
        )


@dataclass(frozen=True)
class BadSample:
    """A sample that could not be read (what a dataset returns for it with on_error=skip); a
    stream's shard that broke off stands for the `count` samples it had left from `index`."""

    index: int
    path: str
    label: str
    error: str
    count: int = 1


def _reported(report: Path | None, split: str) -> set[tuple[int, str]]:
    """(index, path) of the rows of `split` already in `report` (a run resumed in its dir)."""
    if report is None or not report.is_file():
        return set()
    with open(report, **REPORT_TEXT) as f:
        return {(int(r["index"]), r["path"]) for r in own_rows(f) if r["split"] == split}


class Delivery(NamedTuple):
    """What a loader worker sends and each of the loader's stages passes on
    (engine/data/batch_stages.py): the batch (None once every sample of it was bad) and its
    bad samples not yet accounted (a NamedTuple, so pin_memory keeps the type)."""

    batch: Any
    bad: list[BadSample]


class BadSampleLedger:
    """Main-process account of one split's unreadable samples."""

    def __init__(
        self,
        split: str,
        size: int,
        max_bad_fraction: float,
        report: Path | None = None,
        note: str = " and left out (dataset.decode.on_error=skip)",
    ) -> None:
        self.split, self.size, self.max_bad_fraction, self.report = (
            split,
            size,
            max_bad_fraction,
            report,
        )
        self.note = note  # what the warning adds after "unreadable"
        self.seen: dict[int, BadSample] = {}
        self._in_report = _reported(report, split)

    @property
    def count(self) -> int:
        """Distinct bad samples seen so far."""
        return sum(b.count for b in self.seen.values())

    @property
    def fraction(self) -> float:
        """Distinct bad samples as a share of the split."""
        return self.count / self.size if self.size else 0.0

    def record(self, bad: Iterable[BadSample]) -> None:
        """Log each new bad sample once (WARNING) and append it to the report."""
        new = [b for b in bad if b.index not in self.seen]
        for b in new:
            self.seen[b.index] = b
            which = f"{b.index}" if b.count == 1 else f"{b.index}-{b.index + b.count - 1}"
            log.warning(
                "%s sample %s (class %r) unreadable%s: %s: %s",
                self.split,
                which,
                b.label,
                self.note,
                shown(b.path),
                b.error,
            )
        rows = [b for b in new if (b.index, b.path) not in self._in_report]
        if rows and self.report is not None:
            self._append(rows)

    def _append(self, rows: list[BadSample]) -> None:
        self.report.parent.mkdir(parents=True, exist_ok=True)  # type: ignore[union-attr]
        fresh = not self.report.is_file()  # type: ignore[union-attr]
        with open(self.report, "a", **REPORT_TEXT) as f:  # type: ignore[arg-type]
            writer = csv.writer(f)
            if fresh:
                writer.writerow(REPORT_COLUMNS)
            writer.writerows(escaped((self.split, b.index, b.path, b.label, b.error)) for b in rows)
        self._in_report.update((b.index, b.path) for b in rows)

    def check(self) -> None:
        """Raise `BadDataError` when the distinct bad samples exceed the allowed share."""
        if self.count > self.max_bad_fraction * self.size:
            where = f"; all listed in {self.report}" if self.report is not None else ""
            raise BadDataError(
                f"{self.count} of {self.size} {self.split} samples are unreadable "
                f"({self.fraction:.2%}), more than dataset.decode.max_bad_fraction="
                f"{self.max_bad_fraction} allows{where}. Fix or remove the files, or raise "
                "dataset.decode.max_bad_fraction if losing them is acceptable."
            )

    def __call__(self, delivery: Delivery) -> Delivery:
        """The loader's stage: account the bad records of one delivery, pass its batch on."""
        if not delivery.bad:
            return delivery
        self.record(delivery.bad)
        self.check()
        return delivery._replace(bad=[])

    def summary(self) -> str:
        """One line: how many samples of the split are bad, and where they are listed."""
        listed = f", listed in {self.report}" if self.count and self.report is not None else ""
        share = f"{self.fraction:.2%}"
        return f"{self.split}: {self.count} of {self.size} samples unreadable ({share}){listed}"
