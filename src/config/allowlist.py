"""`allowed_targets`: the module prefixes a `_target_` may come from (checked before any import)."""

from __future__ import annotations

from types import ModuleType
from typing import Any

from src.config.errors import ConfigError
from src.config.tree import child_key, target_nodes

ALLOWLIST_KEY = "allowed_targets"
# Under the allowed packages yet able to run arbitrary code (unpickling, remote repos,
# compilers): refused whatever allowed_targets says.
DENIED = (
    "torch.load",
    "torch.serialization",
    "torch.hub",
    "torch.jit.load",
    "torch.package",
    "torch.utils.cpp_extension",
    "torch.utils.model_zoo",
)


def is_allowed(target: str, prefixes: list[str]) -> bool:
    """Whether dotted `target` lies under one of `prefixes`, on module boundaries: `torch.`
    allows `torch.optim.Adam`, not `torchx.run`; `src` allows `src.x`, not `srcevil.x`."""
    for prefix in prefixes:
        base = prefix.rstrip(".")
        if base and (target == base or target.startswith(base + ".")):
            return True
    return False


def is_denied(name: str) -> bool:
    """Whether dotted `name` is (under) one of the `DENIED` code-running entry points."""
    return is_allowed(name, list(DENIED))


def resolved_problem(key: str, target: str, obj: Any, prefixes: list[str]) -> str | None:
    """A line when what `target` imports really lives outside the allowlist (a re-export such
    as `src.x.os.system`) or is a denied entry point; None when it is fine."""
    module = obj.__name__ if isinstance(obj, ModuleType) else getattr(obj, "__module__", None)
    qualname = getattr(obj, "__qualname__", "")
    real = f"{module}.{qualname}" if module and qualname else module
    if is_denied(target) or (real and is_denied(real)):
        return (
            f"{key}={target}: refused, it can run arbitrary code (unpickling, remote or "
            "compiled code); load such things in your own function under src/ instead."
        )
    if module and not is_allowed(module, prefixes):
        return (
            f"{key}={target}: refused, it is {real} from outside {ALLOWLIST_KEY}="
            f"{prefixes}; name it by its own module, and add that to {ALLOWLIST_KEY} only "
            "if you trust it."
        )
    return None


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
