"""Collate functions for `loader.collate_fn`."""

from __future__ import annotations

from typing import TypeVar

T = TypeVar("T")


def already_batched(batch: T) -> T:
    """For datasets whose `__getitems__` returns a whole batch: nothing left to stack."""
    return batch
