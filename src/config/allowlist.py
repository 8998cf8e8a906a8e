"""`allowed_targets`: the module prefixes a `_target_` may come from (checked before any import)."""

from __future__ import annotations

from typing import Any

from src.config.errors import ConfigError
from src.config.tree import child_key, target_nodes

ALLOWLIST_KEY = "allowed_targets"


def is_allowed(target: str, prefixes: list[str]) -> bool:
    """Whether dotted `target` lies under one of `prefixes`, on module boundaries: `torch.`
    allows `torch.optim.Adam`, not `torchx.run`; `src` allows `src.x`, not `srcevil.x`."""
    for prefix in prefixes:
        base = prefix.rstrip(".")
        if base and (target == base or target.startswith(base + ".")):
            return True
    return False


def allowed_prefixes(tree: dict[str, Any]) -> list[str]:
    """The `allowed_targets` list, checked to be a list of non-empty strings."""
    prefixes = tree.get(ALLOWLIST_KEY)
    example = "[src., torch., torchvision.]"
    if not isinstance(prefixes, list) or not all(
        isinstance(p, str) and p.strip(".") for p in prefixes
    ):
        raise ConfigError(
            f"{ALLOWLIST_KEY}={prefixes!r}: expected a list of module prefixes, e.g. {example} "
            "(see conf/config.yaml)."
        )
    return prefixes


def disallowed_targets(tree: dict[str, Any]) -> list[str]:
    """One line per `_target_` in `tree` outside `allowed_targets` (or not a dotted string)."""
    prefixes = allowed_prefixes(tree)
    problems = []
    for path, node in target_nodes(tree):
        key, target = child_key(path, "_target_"), node["_target_"]
        if not isinstance(target, str):
            problems.append(f"{key}={target!r}: expected a dotted import path (a string).")
        elif not is_allowed(target, prefixes):
            problems.append(
                f"{key}={target}: refused, not under {ALLOWLIST_KEY}={prefixes}. If you trust "
                f"it, add its package to {ALLOWLIST_KEY} in conf/config.yaml (or override "
                f"'{ALLOWLIST_KEY}=[{','.join([*prefixes, target.split('.')[0] + '.'])}]')."
            )
    return problems
