"""`allowed_targets`: exactly what a config's `_target_` may name (checked before its import).

An entry of the list is one of:

1. a module path, e.g. `torch.optim`: the public members defined in or exported by exactly
   that module (`torch.optim.Adam`; `torch.optim.lr_scheduler.StepLR` only when
   `torch.optim.lr_scheduler` is listed too);
2. a single object, e.g. `engine.modes.benchmark.BenchmarkSettings`: that name only;
3. a whole package subtree written with `.*`, e.g. `src.models.*` or `myproject.*`: everything
   public under it, at any depth.

Whether an entry is (1) or (2) is decided by importing the entry itself (it is trusted config,
unlike the target); a target no entry admits is refused without importing anything. Refused
whatever the list says: a target with a private (`_`-prefixed) component; one that resolves to a
module or to something not callable; one whose real home (`__module__`) lies outside the
subtree of the entry that admits it (a re-export such as `src.models.small_cnn.torch.load`);
and, as a second line of defence, the code-running entry points of `DENIED`.

`allowed_targets_extra` is appended to the list (the same kinds of entry, checked alike), so a
run or an experiment file allows one more package without repeating the whole list:
`python train.py 'allowed_targets_extra=[myproject.*]'`. The engine's own entries are a third
list, `allowed_targets_engine` (engine/conf/engine.yaml), so a project's list names only its own.

`allowed_targets` is itself config: entries that conf/config.yaml does not list (added by an
experiment file or on the command line) are named in one warning.
"""

from __future__ import annotations

import importlib
import logging
import os
import re
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from types import ModuleType
from typing import Any

from omegaconf import OmegaConf

from engine.config.errors import ConfigError
from engine.config.tree import child_key, target_nodes

log = logging.getLogger(__name__)

ALLOWLIST_KEY = "allowed_targets"
EXTRA_KEY = "allowed_targets_extra"  # appended to ALLOWLIST_KEY's entries
ENGINE_KEY = "allowed_targets_engine"  # the engine's entries, before ALLOWLIST_KEY's
KEYS = (ENGINE_KEY, ALLOWLIST_KEY, EXTRA_KEY)  # the three lists, in the order they are joined
ENTRY = re.compile(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)*(\.\*)?")
CODE = (
    "it can run arbitrary code (commands, unpickling, remote or compiled code); load such "
    "things in your own function under src/ instead."
)
# Refused even when an entry admits them (a user may list `torch.*` or `os.*`): names (and
# everything under them) that run commands or code, by the name written or the one resolved.
CODE_RUNNERS = (
    "torch.load",
    "torch.serialization",
    "torch.hub",
    "torch.jit.load",
    "torch.package",
    "torch.utils.cpp_extension",
    "torch.utils.model_zoo",
    "torch.utils.collect_env",
    "builtins",
    "os",
    "posix",
    "nt",
    "subprocess",
    "shutil",
    "importlib",
    "runpy",
    "pickle",
    "marshal",
    "ctypes",
    "code",
    "pty",
)
DENIED = {
    **dict.fromkeys(CODE_RUNNERS, CODE),
    # members of listed modules that build or fetch what the list does not name
    "torchvision.models.get_model": (
        "it builds any torchvision model by name, also from modules allowed_targets does not "
        "list (detection, video, quantization, ...); name the builder itself, e.g. "
        "torchvision.models.resnet18."
    ),
    "torchvision.models.get_model_builder": (
        "it returns any torchvision model builder by name, also from modules allowed_targets "
        "does not list; name the builder itself, e.g. torchvision.models.resnet18."
    ),
}


@dataclass(frozen=True)
class Grant:
    """An entry that admits a target, and the subtree where the target must really live."""

    entry: str
    scope: str


def under(name: str, base: str) -> bool:
    """Whether dotted `name` is `base` or lies below it, on module boundaries (`torch.optim`
    is under `torch`, `torchx.run` is not)."""
    return name == base or name.startswith(base + ".")


def denied_reason(name: str) -> str | None:
    """Why dotted `name` is refused whatever allowed_targets says, or None."""
    return next((why for base, why in DENIED.items() if under(name, base)), None)


def is_module(name: str) -> bool:
    """Whether `name` (an allowlist entry or a prefix of one: trusted) is an importable module;
    a module that exists but fails to import counts as one (its error shows at the target)."""
    try:
        importlib.import_module(name)
    except ModuleNotFoundError as err:
        return not (err.name and under(name, err.name))
    except Exception:
        return True
    return True


def module_part(name: str) -> str | None:
    """The longest prefix of dotted `name` that is a module (`a.mod` of `a.mod.Class.meth`)."""
    parts = name.split(".")
    for end in range(len(parts), 0, -1):
        if is_module(".".join(parts[:end])):
            return ".".join(parts[:end])
    return None


def grants(target: str, entries: list[str]) -> list[Grant]:
    """The entries that admit `target` by name. Imports only entries whose name is `target` or
    its parent (to tell a module entry from an object entry), never the target itself."""
    found = []
    parent = target.rpartition(".")[0]
    for entry in entries:
        if entry.endswith(".*"):
            if target.startswith(entry[:-1]):
                found.append(Grant(entry, entry[:-2]))
        elif target == entry:  # an object entry (a module entry: refused once imported)
            found.append(Grant(entry, module_part(entry) or parent))
        elif parent == entry and is_module(entry):  # a member of a module entry
            found.append(Grant(entry, entry))
    return found


def _entry_problems(key: str, entries: Any) -> list[str]:
    """One line per malformed entry of the list at config `key` (or one if it is no list)."""
    example = "[torch.optim, engine.modes.benchmark.BenchmarkSettings, myproject.*]"
    if not isinstance(entries, list):
        return [
            f"{key}={entries!r}: expected a list of entries (module paths, objects or "
            f"package.*), e.g. {example} (see conf/config.yaml)."
        ]
    problems = []
    for index, entry in enumerate(entries):
        at = child_key(key, index)
        if isinstance(entry, str) and entry.endswith(".") and ENTRY.fullmatch(entry[:-1]):
            problems.append(
                f"{at}={entry!r}: a prefix is no longer an entry (it admitted every function "
                "under it); list the modules configs need (e.g. torch.optim), or write "
                f"{entry}* only for a package of your own (see conf/config.yaml)."
            )
        elif not isinstance(entry, str) or not ENTRY.fullmatch(entry):
            problems.append(
                f"{at}={entry!r}: expected a module path (torch.optim), an object "
                "(engine.modes.benchmark.BenchmarkSettings) or a package subtree (myproject.*)."
            )
    return problems


def check_entries(tree: dict[str, Any]) -> list[str]:
    """`allowed_targets_engine`, `allowed_targets` and `allowed_targets_extra` joined (an absent
    engine or extra list: none), each checked entry by entry (see the module docstring)."""
    lists = {key: tree.get(key, []) for key in (ENGINE_KEY, EXTRA_KEY)}
    lists[ALLOWLIST_KEY] = tree.get(ALLOWLIST_KEY)
    problems = [line for key in KEYS for line in _entry_problems(key, lists[key])]
    if problems:
        raise ConfigError("\n".join(problems)) from None
    return [entry for key in KEYS for entry in lists[key]]


def project_config() -> Path:
    """The project's conf/config.yaml: under $PROJECT_ROOT (train.py sets it), else in the
    checkout this engine/ folder sits in, else under the working directory."""
    if "PROJECT_ROOT" in os.environ:
        return Path(os.environ["PROJECT_ROOT"]) / "conf" / "config.yaml"
    beside = Path(__file__).resolve().parents[4] / "conf" / "config.yaml"  # engine/src/engine/...
    return beside if beside.is_file() else Path("conf") / "config.yaml"


def shipped_entries(path: Path | None = None) -> list[str]:
    """The three lists as written: `allowed_targets_engine` by the project's conf/engine.yaml
    when it has one, else by the engine's; the other two by the project's conf/config.yaml
    (`project_config`). A file that cannot be read adds nothing."""
    path = project_config() if path is None else path
    own_engine = path.with_name("engine.yaml")
    engine = own_engine if own_engine.is_file() else resources.files("engine.conf") / "engine.yaml"
    written = {ENGINE_KEY: _listed(engine, ENGINE_KEY)}
    written |= {key: _listed(path, key) for key in (ALLOWLIST_KEY, EXTRA_KEY)}
    return [entry for key in KEYS for entry in written[key]]


def _listed(path: Any, key: str) -> list[str]:
    """The list at `key` of YAML file `path` ([] when it cannot be read or lacks the key)."""
    try:
        return list(OmegaConf.create(path.read_text()).get(key) or [])
    except (OSError, ValueError):
        return []


def warn_if_widened(entries: list[str], shipped: list[str] | None = None) -> list[str]:
    """Log one warning naming the entries conf/config.yaml does not list; returns them."""
    shipped = shipped_entries() if shipped is None else shipped
    added = [entry for entry in entries if entry not in shipped]
    if added:
        log.warning(
            "%s adds %s to what conf/config.yaml lists (by an experiment file or override): "
            "configs may instantiate what these admit.",
            ALLOWLIST_KEY,
            ", ".join(added),
        )
    return added


def before_import(key: str, target: Any, entries: list[str]) -> str | None:
    """A line when `target` (the value of `_target_` at `key`) is refused by name, or None."""
    if not isinstance(target, str) or not target:
        return f"{key}={target!r}: expected a dotted import path (a string)."
    private = [part for part in target.split(".") if part.startswith("_")]
    if private:
        return (
            f"{key}={target}: refused, {private[0]} is a private name (a leading _): configs "
            "may name public classes and functions only; call it from your own function "
            f"under a module in {ALLOWLIST_KEY} instead."
        )
    if not grants(target, entries):
        module = target.rpartition(".")[0] or target
        return (
            f"{key}={target}: refused, not in {ALLOWLIST_KEY} (conf/config.yaml); if you "
            f"trust it, add its module ({module}) or the object ({target}) to "
            f"{ALLOWLIST_KEY} in conf/config.yaml or per run: '{EXTRA_KEY}=[{module}]'."
        )
    reason = denied_reason(target)
    return f"{key}={target}: refused, {reason}" if reason else None


def after_import(key: str, target: str, obj: Any, entries: list[str]) -> str | None:
    """A line when what `target` imported is refused: a module, not callable, really from
    outside the entry that admits it (a re-export), or a denied entry point; else None."""
    if isinstance(obj, ModuleType):
        return (
            f"{key}={target}: refused, it is a module, not a class or function; name one of "
            f"its members, e.g. {target}.<Name>."
        )
    if not callable(obj):
        return (
            f"{key}={target}: refused, it is a {type(obj).__name__} value, not a class or "
            "function; write the value itself instead of a _target_ node."
        )
    module = getattr(obj, "__module__", None)
    qualname = getattr(obj, "__qualname__", None) or getattr(obj, "__name__", "")
    real = f"{module}.{qualname}" if isinstance(module, str) and qualname else str(module)
    admitted = grants(target, entries)
    if not isinstance(module, str) or not any(under(module, g.scope) for g in admitted):
        scopes = ", ".join(f"{g.entry}: {g.scope} and below" for g in admitted)
        return (
            f"{key}={target}: refused, it is {real} from outside {ALLOWLIST_KEY} ({scopes}); "
            f"name it by its own module, and add that to {ALLOWLIST_KEY} only if you trust it."
        )
    reason = denied_reason(real)
    return f"{key}={target}: refused, {reason}" if reason else None


def disallowed_targets(tree: dict[str, Any], entries: list[str]) -> list[str]:
    """One line per `_target_` in `tree` refused by name (before anything is imported)."""
    problems = []
    for path, node in target_nodes(tree):
        problem = before_import(child_key(path, "_target_"), node["_target_"], entries)
        if problem:
            problems.append(problem)
    return problems
