"""How a run that fails says why: the error a `_target_` raised (not Hydra's wrapper around
it), and that error as the last line of the run's log file."""

from __future__ import annotations

import gc
import logging
import re
import traceback
from collections.abc import Iterator
from contextlib import contextmanager

from hydra.errors import InstantiationException

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


def one_line(err: BaseException) -> str:
    """`Type: first line of the message` (the whole story is in the traceback above it); for
    an error torch re-raised from a loader worker, the worker's own last line (torch's first
    only says which worker)."""
    lines = str(err).strip().splitlines()
    if len(lines) > 1 and _WORKER.match(lines[0]):
        return lines[-1]
    return f"{type(err).__name__}: {lines[0]}" if lines else type(err).__name__


@contextmanager
def failures_reported() -> Iterator[None]:
    """Around a run: the error that stops it is re-raised as its root cause and logged as the
    run's last log line. A stop request (SystemExit, Ctrl-C) is not an error and passes as is.
    The frames' locals are dropped, so a failed job's loader workers shut down now rather
    than when Hydra's sweep ends."""
    try:
        yield
    except Exception as err:
        cause = root_cause(err)
        log.error("run failed: %s", one_line(cause))
        traceback.clear_frames(err.__traceback__)
        gc.collect()
        if cause is err:
            raise
        raise cause from None
    except BaseException as err:
        traceback.clear_frames(err.__traceback__)
        gc.collect()
        raise
