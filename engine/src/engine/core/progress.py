"""Progress that shows up where the run's output goes: a tqdm bar on a terminal, and a log line
every few seconds elsewhere (`| tee`, nohup, SLURM's output file), where a bar prints nothing
until it closes."""

from __future__ import annotations

import logging
import sys
import time
from collections.abc import Iterable, Iterator
from datetime import timedelta
from typing import Any, TypeVar

from tqdm import tqdm

log = logging.getLogger(__name__)

T = TypeVar("T")
EVERY_S = 30.0  # seconds between progress lines off a terminal (trainer.log_every_n_seconds)


def duration(seconds: float) -> str:
    """`0:01:25`: hours, minutes and whole seconds."""
    return str(timedelta(seconds=round(max(0.0, seconds))))


class Cadence:
    """When the next progress line is due: every `every_s` seconds (0 = never), counted across
    the bars that share it, so epochs shorter than `every_s` still get their lines."""

    def __init__(self, every_s: float, clock: Any = time.monotonic) -> None:
        self.every_s, self.clock = every_s, clock
        self.last = clock()

    def due(self) -> bool:
        """Whether a line is due now (and, if so, the next one `every_s` from now)."""
        now = self.clock()
        if self.every_s <= 0 or now - self.last < self.every_s:
            return False
        self.last = now
        return True


class LoggedBar:
    """`update(n)` as tqdm's; `postfix(...)` adds values (loss, ...) to the next line. On a
    terminal a bar; otherwise a line such as
    `epoch 2/12: 40/120 batches | 85 samples/s | ETA 0:00:56 | loss 1.2345` every `every`
    seconds (0 = never), or when a `Cadence` shared with other bars says so."""

    def __init__(
        self,
        total: int | None,
        desc: str,
        every: float | Cadence = EVERY_S,
        unit: str = "batches",
        clock: Any = time.monotonic,
        terminal: bool | None = None,
    ) -> None:
        self.total, self.desc, self.unit, self.clock = total, desc, unit, clock
        self.cadence = every if isinstance(every, Cadence) else Cadence(every, clock)
        self.terminal = sys.stderr.isatty() if terminal is None else terminal
        self.bar = tqdm(total=total, desc=desc, unit=unit, leave=False, disable=not self.terminal)
        self.done = self.samples = 0
        self.values: dict[str, str] = {}
        self.started = clock()

    def update(self, n: int = 1, samples: int = 0) -> None:
        """`n` more units done (and `samples` more samples, for the rate when units are
        batches)."""
        self.bar.update(n)
        self.done, self.samples = self.done + n, self.samples + samples
        if not self.terminal and self.cadence.due():
            log.info("%s", self.line(self.clock() - self.started))

    def leave_out(self, seconds: float) -> None:
        """`seconds` just spent outside the counted work (a compile): not in the rate or ETA
        (the terminal bar's own clock, tqdm's, keeps them)."""
        self.started += seconds

    def postfix(self, **values: Any) -> None:
        """Values shown after the counts until replaced (floats with 4 decimals)."""
        self.values |= {
            k: f"{v:.4f}" if isinstance(v, float) else str(v) for k, v in values.items()
        }
        elapsed = self.clock() - self.started
        rate = {"samples_s": f"{self.samples / elapsed:.0f}"} if self.samples and elapsed else {}
        self.bar.set_postfix(self.values | rate, refresh=False)

    def line(self, elapsed: float) -> str:
        """`desc: done/total unit | rate | ETA | values` after `elapsed` seconds."""
        counted = self.samples or self.done
        rate = counted / elapsed if elapsed > 0 else 0.0
        what = "samples" if self.samples else self.unit
        parts = [
            f"{self.desc}: {self.done:,}/{self.total:,} {self.unit}"
            if self.total
            else f"{self.desc}: {self.done:,} {self.unit}",
            f"{rate:,.0f} {what}/s",
        ]
        if self.total and self.done:
            parts.append(f"ETA {duration(elapsed * (self.total - self.done) / self.done)}")
        parts += [f"{k} {v}" for k, v in self.values.items()]
        return " | ".join(parts)

    def close(self) -> None:
        """End the bar (a terminal's line is cleared: the epoch's summary line follows)."""
        self.bar.close()


def counted(
    batches: Iterable[T], total: int, desc: str, per_batch: int, every_s: float = EVERY_S
) -> Iterator[T]:
    """`batches` of `per_batch` items each (the last may be short), shown as items of `total`
    (images, not batches) with their rate and ETA, on a terminal or in the log."""
    bar = LoggedBar(total, desc, every_s, unit="images")
    done = 0
    try:
        for batch in batches:
            yield batch
            step = min(per_batch, total - done)
            done += step
            bar.update(step)
    finally:
        bar.close()
