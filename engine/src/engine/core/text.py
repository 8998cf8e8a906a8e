"""What one-line messages hold: file names that stay one line, the first few of a long list,
and the closest spelling for a did-you-mean."""

from __future__ import annotations

import difflib
import os
from collections.abc import Callable, Sequence
from typing import Any

_SURROGATES = range(0xDC80, 0xDD00)  # how os.fsdecode keeps bytes that are not UTF-8


def shown(path: str | os.PathLike[str]) -> str:
    """`path` as it goes into a message: unchanged, unless it holds control characters (a
    newline in a file name) or bytes that are not UTF-8, which become escapes (`\\n`, `\\xff`),
    so the message stays one line and can be logged and printed anywhere."""
    text = os.fspath(path)
    if text.isprintable():
        return text
    out = []
    for ch in text:
        if ord(ch) in _SURROGATES:
            out.append(f"\\x{ord(ch) - 0xDC00:02x}")
        elif ch.isprintable():
            out.append(ch)
        else:
            out.append(ch.encode("unicode_escape").decode("ascii"))
    return "".join(out)


def closest(word: str, choices: list[str], cutoff: float = 0.6) -> str | None:
    """The choice `word` was most likely meant to be (difflib's ratio >= `cutoff`), else None."""
    found = difflib.get_close_matches(word, choices, n=1, cutoff=cutoff)
    return found[0] if found else None


def first_few(
    items: Sequence[Any], most: int, show: Callable[[Any], str] = str, count: str = ""
) -> str:
    """`a, b, c, ... (N in all)`: the first `most` of `items` (each as `show` gives it), then
    how many there are (formatted with the spec `count`: "," groups thousands), so a list of
    100,000 does not make a line of megabytes."""
    more = f", ... ({len(items):{count}} in all)" if len(items) > most else ""
    return ", ".join(map(show, items[:most])) + more
