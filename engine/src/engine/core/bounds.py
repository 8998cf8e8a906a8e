"""Bounds on numeric parameters, written once in their type hints and checked with the config
before any work (engine/config/schema.py): `max_image_pixels: Positive | None`, `dropout:
Share`. A value out of bounds is one line naming the key, what it must be and an example,
instead of an error deep in a run (or a silent nonsense run)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Annotated


@dataclass(frozen=True)
class Bound:
    """Numbers from `least` (excluded when `open_least`) up to `most` (excluded when
    `open_most`); None: no bound on that side. For a list, every item."""

    least: float | None = None
    most: float | None = None
    open_least: bool = False
    open_most: bool = False

    def admits(self, value: float) -> bool:
        if isinstance(value, float) and math.isnan(value):
            return False
        low = self.least is None or (value > self.least if self.open_least else value >= self.least)
        high = self.most is None or (value < self.most if self.open_most else value <= self.most)
        return low and high

    def words(self) -> str:
        """`>= 1`, `> 0`, `>= 0 and < 1`."""
        low = (
            f"{'>' if self.open_least else '>='} {_shown(self.least)}"
            if self.least is not None
            else ""
        )
        if self.most is None:
            return low
        high = f"{'<' if self.open_most else '<='} {_shown(self.most)}"
        return f"{low} and {high}" if low else high


def _shown(number: float) -> str:
    return f"{int(number):,}" if float(number).is_integer() else f"{number:g}"


INT32 = 2**31 - 1  # sizes and counts above this overflow torch's and numpy's int32 paths
DAY = 86_400.0  # seconds; longer spans overflow the platform's timestamps (1e30 did)
Positive = Annotated[int, Bound(1, INT32)]  # a count or size of at least one (batches, widths)
Count = Annotated[int, Bound(0, INT32)]  # zero or more (retries, buffers)
Pixels = Annotated[int, Bound(1, 2**48)]  # an image area (a whole-slide scan is 10^10 pixels)
Bytes = Annotated[int, Bound(1, 2**48)]  # a size in bytes, past int32 (a 4 GB row group)
Seconds = Annotated[float, Bound(0, DAY)]  # a time span, zero allowed
Timeout = Annotated[float, Bound(0, DAY, open_least=True)]  # a time span that must pass
Fraction = Annotated[float, Bound(0, 1)]  # a share from 0 to 1, both included
Share = Annotated[float, Bound(0, 1, open_most=True)]  # 0 up to, not including, 1 (dropout)
Split = Annotated[float, Bound(0, 1, open_least=True, open_most=True)]  # strictly inside (0, 1)
Seed = Annotated[int, Bound(0, 2**32 - 1)]  # a random seed numpy and torch both take
FINITE = Bound(-math.inf, math.inf, open_least=True, open_most=True)  # no inf, no nan
Finite = Annotated[float, FINITE]  # a number a metric or a loss may be (a run's best)
