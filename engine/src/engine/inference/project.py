"""The project whose code `load_model` builds a checkpoint's model with: its conf/config.yaml
gives the allowed `_target_`s, and its folder must be importable for the saved config's
`src.*` targets (a notebook elsewhere has neither on its path).

A checkpoint names its model's class; the code comes from the project the user points at,
never from a path stored in the file (its saved paths.root_dir put a folder of the sender's
choosing first on sys.path, and its src/models/*.py were imported), nor from where the file
lies (a folder unpacked from elsewhere can hold a conf/ and src/ of its own). Two projects'
checkpoints loaded in one process each get their own project's code (`project_code`)."""

from __future__ import annotations

import importlib.util
import logging
import os
import sys
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from importlib.machinery import ModuleSpec
from pathlib import Path
from types import ModuleType
from typing import Any

from engine.config.allowlist import project_config
from engine.runs.checkpoint_files import CheckpointError

log = logging.getLogger(__name__)

PROJECT_CONFIG = Path("conf") / "config.yaml"  # what marks a project's root
ENGINE = __name__.split(".")[0]  # never a project's code (a checkout's engine/ is a plain folder)


def _is_project(folder: Path) -> bool:
    return (folder / PROJECT_CONFIG).is_file()


def _candidates() -> list[tuple[Path, str]]:
    """Where the project may be, most specific first, each with how it was found: $PROJECT_ROOT
    (train.py's), the working directory and the folders above it, the checkout this engine is
    imported from (the code already running; project_config, as allowed_targets is read)."""
    found = (
        [(Path(os.environ["PROJECT_ROOT"]), "$PROJECT_ROOT")]
        if "PROJECT_ROOT" in os.environ
        else []
    )
    cwd = Path.cwd().resolve()
    found += [(folder, "the working directory") for folder in (cwd, *cwd.parents)]
    return [*found, (project_config().parent.parent.resolve(), "this engine's checkout")]


def _recorded(config: dict[str, Any]) -> Path | None:
    """The project the checkpoint says it was trained in (its saved paths.root_dir), when it
    names one: only ever compared with the one used, never imported from."""
    paths = config.get("paths")
    saved = paths.get("root_dir") if isinstance(paths, dict) else None
    return Path(saved) if isinstance(saved, str) and Path(saved).is_absolute() else None


def find_project(config: dict[str, Any], file: Path, given: str | Path | None) -> Path | None:
    """The root of the project whose code builds checkpoint `file`'s model: `given`
    (load_model's project_root), else the first of `_candidates` holding conf/config.yaml,
    else None. When the checkpoint (saved config `config`) records another project, one
    warning line names both."""
    if given is not None:
        root, how = Path(given).expanduser().resolve(), "project_root="
        if not _is_project(root):
            raise CheckpointError(
                f"load_model(project_root={given!s}): {root / PROJECT_CONFIG} does not exist; "
                "pass the checkout that trained the model (the folder holding conf/ and src/)."
            )
    else:
        found = [(folder.resolve(), how) for folder, how in _candidates() if _is_project(folder)]
        if not found:
            return None
        root, how = found[0]
    recorded = _recorded(config)
    if recorded is not None and recorded.resolve() != root:
        log.warning(
            "%s was trained in %s; its model's code comes from %s (%s), never from a path a "
            "checkpoint holds: pass load_model(..., project_root=...) to choose another.",
            file,
            recorded,
            root,
            how,
        )
    return root


def missing_project(file: Path) -> CheckpointError:
    """The error of a checkpoint whose project was not found, with the fix."""
    return CheckpointError(
        f"{file}: cannot find the project whose code builds its model (no {PROJECT_CONFIG} "
        "at $PROJECT_ROOT, in the working directory or above it, or beside this engine): pass "
        "load_model(..., project_root='<the checkout holding conf/ and src/>')."
    )


def _spec_folder(spec: ModuleSpec) -> Path | None:
    """The sys.path folder a top-level module of `spec` is imported from (a package's first
    folder's parent), or None when it has no file."""
    files = list(spec.submodule_search_locations or [])  # a namespace package's too
    files = files or ([spec.origin] if spec.has_location and spec.origin else [])
    where = next(iter(files), None)
    return Path(where).resolve().parent if where else None


def _folder(module: ModuleType) -> Path | None:
    """The sys.path folder top-level `module` was imported from, or None (no file)."""
    return _spec_folder(module.__spec__) if module.__spec__ is not None else None


def _taken(name: str) -> dict[str, ModuleType]:
    """Top-level module `name` and its submodules, removed from sys.modules."""
    return {key: sys.modules.pop(key) for key in list(sys.modules) if key.split(".")[0] == name}


# The modules of the projects built by name while another project's held those names, by
# (root, top-level name): loading one again reuses them (the same classes, nothing re-executed).
_SET_ASIDE: dict[tuple[Path, str], dict[str, ModuleType]] = {}


def _imported_from(name: str) -> Path | None:
    """The folder an imported namespace package `name` was first imported from, as its
    imported submodules' files show (its own __path__ is recomputed from sys.path)."""
    for key, module in list(sys.modules.items()):
        file = getattr(module, "__file__", None)
        if key.startswith(f"{name}.") and file:
            depth = key.count(".") - 1 + file.endswith("__init__.py")  # up to the package `name`
            package = Path(file).resolve().parents[depth]
            return package.parent if package.name == name else None
    return None


def _refuse_shadowed_namespaces(root: Path, names: set[str]) -> None:
    """A package of the project with no __init__.py (a namespace package) loses to a regular
    package of its name anywhere on sys.path, or to one imported already: Python would build
    the checkpoint's model from that other project's code without a word. Refused in one line."""
    for name in sorted(names):
        if not (root / name).is_dir():
            continue
        module = sys.modules.get(name)
        spec = module.__spec__ if module is not None else importlib.util.find_spec(name)
        where = _spec_folder(spec) if spec is not None else None
        if module is not None and spec is not None and spec.origin is None:
            where = _imported_from(name) or where  # a namespace's path follows sys.path
        if where is not None and where != root.resolve():
            raise CheckpointError(
                f"project_root={root}: its {name}/ has no __init__.py (a namespace package), "
                f"and the {name} package of {where} is imported in its place, whose code would "
                f"build this checkpoint's model; add {root / name / '__init__.py'} (and one in "
                "each of its folders, as the template's src/ has)."
            )


@contextmanager
def project_code(root: Path, targets: Iterable[str]) -> Iterator[None]:
    """Within it, `targets` (a checkpoint's `_target_`s) import from project `root`'s files.

    Python imports a package once per process under its name, so a notebook loading the
    checkpoints of two projects (both naming src.models.*) built the second with the first's
    src/. Each top-level package of `targets` that is `root`'s own (root/<name>/__init__.py or
    root/<name>.py; a plain folder, as the checkout's engine/, is none) and already imported
    from elsewhere is swapped in sys.modules for root's for the duration, and the other's put
    back after; not yet imported, it is imported from root, put first on sys.path, and stays.
    A model keeps its own code, as its functions hold their module's globals; what looks a
    class up by name instead (pickle.dumps of the whole model object, an import inside a
    function, inspect.getsource of the class) finds the project imported first: save such a
    model's state_dict()."""
    names = {target.split(".")[0] for target in targets}
    own = sorted(
        n for n in names if (root / n / "__init__.py").is_file() or (root / f"{n}.py").is_file()
    )
    held = [n for n in own if n in sys.modules and _folder(sys.modules[n]) != root]
    path = list(sys.path)
    sys.path[:] = [str(root), *(entry for entry in path if entry != str(root))]
    try:
        _refuse_shadowed_namespaces(root, names - {*own, ENGINE})
    except CheckpointError:
        sys.path[:] = path
        raise
    others = {name: _taken(name) for name in held}
    for name in held:
        sys.modules.update(_SET_ASIDE.get((root, name), {}))
    try:
        yield
    finally:
        for name, modules in others.items():
            _SET_ASIDE[(root, name)] = _taken(name)
            sys.modules.update(modules)
        if held:
            sys.path[:] = path
