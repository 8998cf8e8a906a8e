"""The command line's mistakes, said as the project says a bad key: one line with the fix.

Hydra's own words for a misspelt key advise the wrong fix ("To append to your config use
+loader.num_worker=4"), a misspelt option lists every option over twenty lines, and an error
during the run prints after its log line again as a partial traceback. `errors_said_once`
around a launch turns each into one line on stderr and status 1, ending in Hydra's own hint
(HINT: Hydra prints it after every error it reports); HYDRA_FULL_ERROR=1 keeps Hydra's full
tracebacks.
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Iterator
from contextlib import contextmanager

from hydra.errors import (
    CompactHydraException,
    ConfigCompositionException,
    MissingConfigException,
)
from omegaconf import DictConfig

from engine.core.failures import one_line, root_cause, was_said
from engine.core.text import closest

FULL_ERROR = "HYDRA_FULL_ERROR"
_OVERRIDE = re.compile(r"Could not override '([^']+)'")
_OPTION = re.compile(r"Could not find '([^']+)/([^'/]+)'")
ENGINE_CONF = "pkg://engine.conf"  # the engine's config groups (engine/conf), on hydra.searchpath
HINT = f"(set the environment variable {FULL_ERROR}=1 for a complete stack trace)"  # Hydra's


def _given(key: str, overrides: list[str]) -> str:
    """The override as typed for `key` (`loader.num_worker=4`), else `key`."""
    return next((o for o in overrides if o.split("=", 1)[0] == key), key)


def unknown_key(err: ConfigCompositionException, overrides: list[str]) -> str | None:
    """`loader.num_worker=4: no key loader.num_worker (did you mean loader.num_workers?) ...`
    for an override of a key the composed config does not have."""
    match, cause = _OVERRIDE.search(str(err)), err.__cause__
    parent = getattr(cause, "parent_node", None)
    if match is None or not isinstance(parent, DictConfig):
        return None
    full, missing = match.group(1), str(getattr(cause, "key", ""))
    # the level that lacks the key: loader for loader.num_worker, the root for loadr.x
    prefix = getattr(cause, "full_key", full).rpartition(".")[0]
    known = [str(k) for k in parent if str(k) != "hydra"]
    close = closest(missing, known)
    where = f"{prefix}." if prefix else ""
    hint = f" (did you mean {where}{close}?)" if close else ""
    return (
        f"{_given(full, overrides)}: the config has no key {where}{missing}{hint}; "
        f"{prefix or 'the config'} has {', '.join(known)}. Fix the spelling, or write "
        f"+{_given(full, overrides)} to add a new key on purpose."
    )


def unknown_option(err: MissingConfigException, overrides: list[str]) -> str | None:
    """`dataset=imgfolder: the dataset group has no option imgfolder (did you mean
    dataset=imagefolder?)`; a group's options are those of conf/ and of the engine's."""
    match = _OPTION.search(str(err))
    options = [str(o) for o in (err.options or [])]
    if match is None or not options:
        return None
    group, option = match.groups()
    mentions = [o for o in overrides if o.lstrip("+~").split("=", 1)[0] == group]
    typed = next((o for o in mentions if option in o.split("=", 1)[1]), f"{group}={option}")
    sign = typed[: len(typed) - len(typed.lstrip("+~"))]  # +sweep=... stays +sweep=...
    close = closest(option, options)
    hint = f" (did you mean {sign}{group}={close}?)" if close else ""
    return f"{typed}: the {group} group has no option {option}{hint}; its options: {', '.join(options)}."


def searchpath_lost(err: MissingConfigException, overrides: list[str]) -> str | None:
    """A `hydra.searchpath=[...]` override replaces the list conf/config.yaml writes, the
    engine's groups with it: say so, and how to add a path instead."""
    given = next((o for o in overrides if o.startswith("hydra.searchpath=")), None)
    if given is None or ENGINE_CONF in given:
        return None
    paths = given.split("=", 1)[1].strip("[] ")
    kept = f"[{ENGINE_CONF},{paths}]" if paths else f"[{ENGINE_CONF}]"  # Hydra refuses `[a,]`
    return (
        f"{given}: it replaces conf/config.yaml's hydra.searchpath, so the engine's config "
        f"groups ({ENGINE_CONF}: eval, logger, ...) are gone; keep them first: "
        f"hydra.searchpath={kept}"
    )


def explain(err: BaseException, overrides: list[str]) -> str:
    """One line for an error that ended a launch before or during its run, Hydra's hint at
    its end."""
    return f"{_said_as(err, overrides)} {HINT}"


def _said_as(err: BaseException, overrides: list[str]) -> str:
    if isinstance(err, MissingConfigException) and (line := searchpath_lost(err, overrides)):
        return line
    if isinstance(err, ConfigCompositionException) and (line := unknown_key(err, overrides)):
        return line
    if isinstance(err, MissingConfigException) and (line := unknown_option(err, overrides)):
        return line
    if isinstance(err, CompactHydraException):  # already Hydra's short message: one line of it
        return " ".join(part.strip() for part in str(err).splitlines() if part.strip())
    return one_line(root_cause(err))


@contextmanager
def errors_said_once(overrides: list[str] | None = None) -> Iterator[None]:
    """Around Hydra's main: an error ends the process in one line on stderr (none more when
    the run said it already) with status 1. Under HYDRA_FULL_ERROR=1, Hydra's own report."""
    before = os.environ.get(FULL_ERROR)
    if before == "1":
        yield
        return
    os.environ[FULL_ERROR] = "1"  # Hydra re-raises instead of printing its partial traceback
    try:
        yield
    except Exception as err:
        if not was_said(err):
            print(explain(err, sys.argv[1:] if overrides is None else overrides), file=sys.stderr)
        raise SystemExit(1) from None
    finally:
        if before is None:
            os.environ.pop(FULL_ERROR, None)
        else:
            os.environ[FULL_ERROR] = before
