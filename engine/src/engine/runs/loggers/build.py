"""The `logger` config group: its checks before any work, and the loggers it builds."""

from __future__ import annotations

import importlib.util
from typing import Any

from hydra._internal.utils import _locate  # what instantiate uses (validate_config too)
from hydra.utils import instantiate
from omegaconf import DictConfig

from engine.runs.loggers.base import Logger, RunContext
from engine.runs.loggers.fanout import Loggers

GROUP = "logger"


def logger_problems(cfg: DictConfig) -> list[str]:
    """One line per `logger.<name>` node that is not a Logger's `_target_`, whose logger
    needs a package this environment lacks (validate_config has checked that targets import),
    or that its logger's `start_problem` stops (an unreachable tracking server)."""
    problems = []
    for name, node in (cfg.get(GROUP) or {}).items():
        if not isinstance(node, DictConfig) or "_target_" not in node:
            problems.append(
                f"{GROUP}.{name}: expected a node with a _target_ naming a Logger subclass "
                f"(engine/conf/logger/*.yaml); got {node!r}."
            )
            continue
        target = _locate(node._target_)
        if not (isinstance(target, type) and issubclass(target, Logger)):
            problems.append(
                f"{GROUP}.{name}._target_={node._target_}: not a logger; name a subclass of "
                "engine.runs.loggers.base.Logger (engine/docs/engine.md)."
            )
        elif target.requires and importlib.util.find_spec(target.requires[0]) is None:
            module, install = target.requires
            problems.append(f"{GROUP}={name} needs {module}: {install}")
        elif (problem := target.start_problem(f"{GROUP}.{name}", node)) is not None:
            problems.append(problem)
    return problems


def build_loggers(cfg: DictConfig, context: RunContext, enabled: bool) -> Loggers:
    """Every logger `cfg.logger` names, built with `run=context` (none when not `enabled`:
    the other ranks of a distributed job)."""
    nodes: dict[str, Any] = dict(cfg.get(GROUP) or {}) if enabled else {}
    built: dict[str, Logger] = {}
    try:
        for name, node in nodes.items():
            # partial: the context is passed as it is, not merged into the config as a node
            built[str(name)] = instantiate(node, _partial_=True)(run=context)
    except BaseException:
        Loggers(built).close()  # the loggers built before the one that failed
        raise
    return Loggers(built)
