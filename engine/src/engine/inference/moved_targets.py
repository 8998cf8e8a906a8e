"""The `_target_`s a checkpoint written before engine 1.0 saved, as they read now.

Before 1.0 the engine lived in the template's `src/`; the split moved those modules into
`engine/` and the template's loss, metric and schedule modules up one level. A checkpoint
keeps the names it was trained with, so an older one would name modules that no longer
exist; its saved config is read through this table instead (one line says so). Its
resumed training (`trainer.resume=<file>`) needs no table: it builds from today's config."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

# old module prefix -> the prefix it has had since engine 1.0; the first match wins
MOVED = (
    ("src.training.losses.", "src.losses."),
    ("src.training.metrics.accuracy.", "src.metrics.accuracy."),
    ("src.training.schedules.", "src.schedules."),
    ("src.training.settings.", "engine.training.settings."),
    ("src.data.", "engine.data."),
    ("src.modes.", "engine.modes."),
    ("src.sweeps.", "engine.sweeps."),
)


def _renamed(target: str) -> str:
    for old, new in MOVED:
        if target.startswith(old):
            return new + target[len(old) :]
    return target


def _walk(node: Any, changed: list[str]) -> Any:
    if isinstance(node, dict):
        out = {key: _walk(value, changed) for key, value in node.items()}
        target = out.get("_target_")
        if isinstance(target, str) and (renamed := _renamed(target)) != target:
            out["_target_"] = renamed
            changed.append(target)
        return out
    if isinstance(node, list):
        return [_walk(item, changed) for item in node]
    return node


def moved_targets(config: dict[str, Any], file: Path) -> dict[str, Any]:
    """`config` (saved in checkpoint `file`) with its pre-1.0 `_target_`s renamed (MOVED);
    the names then pass the same allowed_targets check as any other."""
    changed: list[str] = []
    renamed = _walk(config, changed)
    if changed:
        log.info(
            "%s was written before engine 1.0: its %d _target_(s) (e.g. %s) read as they are "
            "named since the engine/template split",
            file,
            len(changed),
            changed[0],
        )
    return renamed
