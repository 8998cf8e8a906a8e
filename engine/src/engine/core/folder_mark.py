"""One owned folder for every writer: a writer claims its folder before its first byte, with
one mark (writer, engine version, the files it writes there), and writes only there.

The mark is the writer's lock file (engine/core/folder_lock.py), so the same file says who
holds the folder now and who owns it. The rules, the same for every writer:
- a missing or empty folder is claimed;
- a folder holding entries and no mark is someone else's (a dataset root, a checkout, a
  user's results): refused, before anything is written there; a writer that fills only the
  names it lists (`beside`: mode=cache's train/ and val/, mode=shards' files) is refused only
  where such a name is taken, and leaves the other entries be (cache.dir=/data with the
  images in /data/raw/);
- a folder marked by another writer (a training's run dir given to mode=eval) is refused;
- in its own folder a writer replaces only the files its mark lists: an entry of the
  writer's names that the mark does not list was put there by someone else, and is refused.
A mark naming no writer (an old run's `.run.lock`, an old cache's `.cache.lock`, or one
unreadable: a hand edit) counts as the mark of the writer its caller infers from the folder
(`unnamed`), listing the files it writes. A mark that is no regular file of the folder (a
folder, a link: its record would be written wherever the link points) is refused.

The marks (MARKS): run dirs `.run.lock` and sweep dirs `.sweep.lock`
(engine/runs/run_lock.py), cache.dir `.cache.lock` (engine/modes/cache.py), shards.dir
`.shards.lock` (engine/data/shards/writer.py); a folder holding another's is refused."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from engine import __version__
from engine.core import folder_lock

RUN, SWEEP, CACHE, SHARDS = ".run.lock", ".sweep.lock", ".cache.lock", ".shards.lock"
# each mark, and whose folder it marks (a run's names its mode too: a run of mode=eval)
MARKS = {RUN: "a run", SWEEP: "a multirun", CACHE: "mode=cache", SHARDS: "mode=shards"}


def _who(mark: str, writer: str | None) -> str:
    """Whose folder `mark` says it is: `mode=cache`, `a multirun`, `a run of mode=eval`."""
    kind = MARKS.get(mark, "")
    if mark == RUN and writer and writer != kind:
        return f"{kind} of {writer}"
    return writer or kind


def _shown(names: list[str]) -> str:
    """`a, b, c, d and 6 more`: the first few of `names`, for one line."""
    more = f" and {len(names) - 4} more" if len(names) > 4 else ""
    return ", ".join(names[:4]) + more


def _kind(path: Path) -> str:
    if path.is_symlink():
        return "a link" if path.exists() else "a link to nothing"
    return "a folder" if path.is_dir() else "no regular file"


def mark_problem(path: Path, writer: str) -> str | None:
    """Why file `path` cannot be `writer`'s mark, or None: it is there and no regular file of
    its own (a folder, a link, a hard link: the lock record would be written over the file it
    shares its bytes with)."""
    if not os.path.lexists(path):
        return None
    if path.is_symlink() or not path.is_file():
        return f"{path} is {_kind(path)}, where {writer} keeps its mark"
    names = path.stat().st_nlink
    if names > 1:
        return f"{path} is a hard link (one file of {names} names), where {writer} keeps its mark"
    return None


def owner_problem(
    folder: Path,
    mark: str,
    writer: str,
    files: frozenset[str],
    ours: frozenset[str] = frozenset(),
    unnamed: Callable[[Path], str] | None = None,
    beside: bool = False,
    old_marks: bool = True,
) -> str | None:
    """Why `writer` may not write `files` into `folder` whose mark is file `mark`, or None.
    `ours`: entries this writer wrote before it could claim (Hydra's .hydra/; what an engine
    older than its mark left, as that output's own record says); `unnamed`: the writer a mark
    naming none stands for (default: this one); `beside`: an unmarked folder may hold other
    entries than `files`; `old_marks`: a mark listing no files is an older engine's, which
    listed none, and stands for all `files` (False where no older engine wrote `mark`: such a
    mark, e.g. an empty one a full disk left, lists none). Names are looked up as the file
    system does (a case-insensitive disk finds METRICS.JSON), links to nothing included."""
    if os.path.lexists(folder) and not folder.is_dir():
        return f"{folder} is {'a file' if folder.is_file() else _kind(folder)}, not a folder"
    path = folder / mark
    problem = mark_problem(path, writer)
    if problem is not None:
        return problem
    other = next((name for name in MARKS if name != mark and os.path.lexists(folder / name)), None)
    if other is not None:
        owner = _who(other, folder_lock.read_holder(folder / other).get("writer"))
        whose = (
            f"this run's own folder (its {other})"
            if folder_lock.held_here(folder / other)
            else f"the folder of {owner} (its {other} says so)"
        )
        return (
            f"{folder} is {whose}, and {_who(mark, writer)} writes only into a folder of its "
            "own (a new folder inside it is one)"
        )
    if path.is_file():
        record = folder_lock.read_holder(path)
        named = record.get("writer")
        owner = named or (unnamed(folder) if unnamed else writer)
        if owner != writer:
            how = f"its {mark} says so" if named else f"its {mark} names none; its files do"
            return (
                f"{folder} is the folder of {owner} ({how}), and {writer} would write over "
                "that one's files"
            )
        listed = set(record.get("files", files if old_marks else ()))
        theirs = sorted(n for n in files - listed - ours if os.path.lexists(folder / n))
        if theirs:
            return (
                f"{folder} holds {_shown(theirs)}, which its mark ({mark}) does not list as "
                f"{writer}'s, and {writer} would write over them"
            )
        return None
    if not folder.is_dir():
        return None
    entries = sorted(set(os.listdir(folder)) - ours)
    if beside:
        taken = sorted(name for name in files - ours if os.path.lexists(folder / name))
        if taken:
            return (
                f"{folder} holds {_shown(taken)}, which no {mark} there lists as written by "
                f"{writer} (the mark it leaves in its folders): it is someone else's, and "
                f"{writer} replaces only files it wrote itself"
            )
        return None
    if entries:
        return (
            f"{folder} already holds {_shown(entries)}, and no {mark} (the mark {writer} leaves "
            f"in a folder of its own): it is someone else's, and {writer} writes only into a new "
            "or empty folder, or one it marked"
        )
    return None


def claim(
    folder: Path, mark: str, writer: str, files: frozenset[str], add: bool = True, **record: Any
) -> Any:
    """Hold `folder`'s mark for `writer` (its lock: engine/core/folder_lock.py `hold`), the
    mark listing `files`, and with `add` what an earlier mark of this writer listed besides (a
    run dir: its names across engine versions; mode=shards, whose files change with each
    write, lists its own); returns the earlier record. Check `owner_problem` first: this only
    writes the mark."""
    path = folder / mark
    listed = folder_lock.read_holder(path).get("files", []) if path.is_file() and add else []
    return folder_lock.hold(
        path, writer=writer, version=__version__, files=sorted({*listed, *files}), **record
    )
