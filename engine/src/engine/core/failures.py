"""How a run that fails says why: the error a `_target_` raised (not Hydra's wrapper around
it), once, in one line on stderr and in the run's log file, whose traceback goes to the log
file only (HYDRA_FULL_ERROR=1 prints it too)."""

from __future__ import annotations

import gc
import logging
import re
import traceback
from collections.abc import Iterator
from contextlib import contextmanager

from hydra.errors import InstantiationException

from engine.core.log_streams import file_handlers

log = logging.getLogger(__name__)

_TARGET = re.compile(r"Error in call to target '([^']+)'")
_WORKER = re.compile(r"Caught \w+ in DataLoader worker process \d+\.$")


def root_cause(err: BaseException) -> BaseException:
    """What a `_target_` raised, from inside Hydra's InstantiationException: the wrapper keeps
    only its repr, which drops an OSError's file name (`FileNotFoundError(2, '...')`). The
    target that raised it is added as a note (Python 3.11+)."""
    while isinstance(err, InstantiationException) and err.__cause__ is not None:
        target = _TARGET.search(str(err))
        err = err.__cause__
        if target and hasattr(err, "add_note"):
            err.add_note(f"(raised while building {target.group(1)} from the config)")
    return err


def innermost(err: BaseException) -> BaseException:
    """The last error of `err`'s cause chain (under Hydra's wrapping and any other)."""
    while err.__cause__ is not None:
        err = err.__cause__
    return err


def one_line(err: BaseException) -> str:
    """`Type: first line of the message` (the whole story is in the traceback above it); for
    an error torch re-raised from a loader worker, the worker's own last line (torch's first
    only says which worker)."""
    lines = str(err).strip().splitlines()
    if len(lines) > 1 and _WORKER.match(lines[0]):
        line = lines[-1]
    else:
        line = f"{type(err).__name__}: {lines[0]}" if lines else type(err).__name__
    return " ".join([line, *getattr(err, "__notes__", [])])


def said(err: BaseException) -> str:
    """What a failed run prints: `one_line`, but every line of a message that lists several
    problems (a ConfigError names each bad key on its own line); never a traceback (torch's
    re-raise from a worker carries one: its last line is kept)."""
    lines = str(err).strip().splitlines()
    if len(lines) < 2 or _WORKER.match(lines[0]):
        return one_line(err)
    return "\n".join(
        [f"{type(err).__name__}: {lines[0]}", *lines[1:], *getattr(err, "__notes__", [])]
    )


def traceback_to_log_file(err: BaseException) -> None:
    """`err`'s traceback into the run's log file alone: the console keeps its one line."""
    record = log.makeRecord(
        log.name,
        logging.ERROR,
        __file__,
        0,
        "the traceback of the error below:",
        (),
        (type(err), err, err.__traceback__),
    )
    for handler in file_handlers():
        handler.handle(record)


_said: list[BaseException] = []  # the errors failures_reported said (each is said once)


def was_said(err: BaseException) -> bool:
    """Whether `failures_reported` printed and logged `err` already."""
    return any(err is said for said in _said)


def drop_locals(err: BaseException) -> None:
    """Clear the locals of every frame `err` and the errors chained to it (its cause, its
    context) passed through, then collect: what the run held (loaders and their workers) goes
    now. A failed job's workers would otherwise live on in the traceback of an error Hydra
    keeps with the job's result, and end only at a later garbage collection, each then
    waiting out torch's 5 s join timeout."""
    seen: set[int] = set()
    chained: BaseException | None = err
    while chained is not None and id(chained) not in seen:
        seen.add(id(chained))
        traceback.clear_frames(chained.__traceback__)
        chained = chained.__cause__ or chained.__context__
    gc.collect()


@contextmanager
def failures_reported() -> Iterator[None]:
    """Around a run: the error that stops it is logged in one line (stderr and the log file),
    its traceback in the log file alone, and re-raised as its root cause (`was_said` knows it:
    train.py's launch prints nothing more). A stop request (SystemExit, Ctrl-C) is not an
    error and passes as is. Either way the frames' locals are dropped (`drop_locals`)."""
    try:
        yield
    except Exception as err:
        cause = root_cause(err)
        traceback_to_log_file(cause)  # first: the one line below it ends the log
        log.error("run failed: %s", said(cause))
        _said[:] = [*_said[-99:], cause]
        drop_locals(err)
        if cause is err:
            raise
        raise cause from None
    except BaseException as err:
        drop_locals(err)
        raise
