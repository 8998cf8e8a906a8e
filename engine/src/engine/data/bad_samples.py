"""Unreadable samples under `dataset.decode.on_error=skip`: the record a dataset returns instead of a
sample, the collate wrapper that sets those records apart, the per-split ledger that logs each
bad file once, lists it in `bad_samples.csv` and stops the run past `dataset.decode.max_bad_fraction`,
and the DataLoader that hands the records to its ledger and yields only clean batches.
"""

from __future__ import annotations

import csv
import logging
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

from torch.utils.data import DataLoader, default_collate

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


class Delivery(NamedTuple):
    """What a skipping loader yields: the clean batch (None if every sample was bad) and the
    bad records (a NamedTuple, so pin_memory keeps the type)."""

    batch: Any
    bad: list[BadSample]


class SkipBadCollate:
    """Collate wrapper for on_error=skip: drops `BadSample`s, collates the rest with `collate`."""

    def __init__(self, collate: Callable[[list[Any]], Any] | None = None) -> None:
        self.collate = collate if collate is not None else default_collate

    def __call__(self, samples: list[Any]) -> Delivery:
        bad = [s for s in samples if isinstance(s, BadSample)]
        if not bad:
            return Delivery(self.collate(samples), [])
        good = [s for s in samples if not isinstance(s, BadSample)]
        return Delivery(self.collate(good) if good else None, bad)


def _reported(report: Path | None, split: str) -> set[tuple[int, str]]:
    """(index, path) of the rows of `split` already in `report` (a run resumed in its dir)."""
    if report is None or not report.is_file():
        return set()
    with open(report, **REPORT_TEXT) as f:
        return {(int(r["index"]), r["path"]) for r in own_rows(f) if r["split"] == split}


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

    def take(self, delivery: Delivery) -> Any:
        """Account the bad records of one delivery; the clean batch, or None if none is left."""
        if delivery.bad:
            self.record(delivery.bad)
            self.check()
        return delivery.batch

    def summary(self) -> str:
        """One line: how many samples of the split are bad, and where they are listed."""
        listed = f", listed in {self.report}" if self.count and self.report is not None else ""
        share = f"{self.fraction:.2%}"
        return f"{self.split}: {self.count} of {self.size} samples unreadable ({share}){listed}"


def filtered(deliveries: Iterable[Delivery], loader: SkippingLoader) -> Iterator[Any]:
    """The clean batches of `deliveries`, their bad samples handed to `loader`'s ledger."""
    for delivery in deliveries:
        batch = loader.bad_samples.take(delivery)
        if batch is None:
            loader.dropped_batches += 1
        else:
            yield batch


class SkippingLoader(DataLoader):
    """DataLoader for on_error=skip (collate_fn a `SkipBadCollate`): every iteration, by any
    consumer, hands the bad records to `bad_samples` and yields only the clean batches; an
    entirely bad batch is left out (counted in `dropped_batches`, so a checkpoint's position
    in the epoch stays exact). `len()` still counts the batches the sampler makes."""

    bad_samples: BadSampleLedger
    dropped_batches: int = 0  # entirely bad batches left out in the current pass

    def __iter__(self) -> Iterator[Any]:  # type: ignore[override]
        self.dropped_batches = 0
        return filtered(super().__iter__(), self)
