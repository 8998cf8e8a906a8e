"""train.py, src/ and the project's tests import the engine only through `engine.api` (and
`engine_dev.api` in tests): the names an engine release keeps within its major version, so an
upgrade never breaks them (the engine manual's engine.md, "The public API": make docs)."""

from __future__ import annotations

import ast
import importlib
import re
from collections.abc import Iterator
from pathlib import Path

import engine.api
import engine_dev.api

ROOT = Path(__file__).resolve().parents[1]
PUBLIC = {"engine": engine.api, "engine_dev": engine_dev.api}
ALLOWED = {"engine", "engine.api", "engine_dev.api"}  # `import engine`: its __version__
FROM_TOP = {"__version__"}  # what `from engine import ...` may take: no submodule
# a dotted path into the engine's modules written as a string (a monkeypatch target, a logger
# name); engine.conf (the config package, pkg://engine.conf) and engine_dev.fixtures (the
# pytest plugin) are public, and an allowlist pattern (engine.data.datasets.*) is config
INTERNAL_PATH = re.compile(r"engine(_dev)?\.(?!api\b|conf\b|fixtures\b)[a-z_]+(\.[A-Za-z_]+)*")
FIX_PATH = "patch or listen to what engine.api exposes (a logger: 'engine', the parent of all)"


def checked_files() -> list[Path]:
    """train.py, src/ and the tests a project owns: in the template, those `make new-project`
    copies (the rest of tests/ proves the engine's guarantees through its internals, and is
    updated with it); in a project, all of tests/."""
    files = [ROOT / "train.py", *sorted((ROOT / "src").rglob("*.py"))]
    if (ROOT / "tools" / "new_project.py").is_file():  # the template
        from tools.new_project import template_suite

        return files + [ROOT / path for path in sorted(template_suite(ROOT))]
    return files + sorted((ROOT / "tests").rglob("*.py"))


def public_name(module: str, name: str) -> str:
    """Where `name` of `module` is public: `from engine.api import X`, or why it is not."""
    top = module.split(".")[0]
    try:
        obj = getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError):
        obj = None
    api = PUBLIC[top]
    same = [public for public in api.__all__ if obj is not None and getattr(api, public) is obj]
    if same:
        return f"import it as `from {top}.api import {same[0]}`"
    return (
        f"it is internal (may change in any release): use a name of {top}.api "
        "(the engine manual's engine.md: make docs), or reach a `_target_` of conf/ through "
        "the config"
    )


def internal_imports(path: Path, root: Path = ROOT) -> Iterator[str]:
    """One line per engine name `path` imports from outside engine.api: file, line, the fix."""
    where = path.relative_to(root).as_posix()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            if node.module in PUBLIC:  # from engine import training: a module, internal
                for alias in node.names:
                    if alias.name not in FROM_TOP and alias.name != "api":
                        fix = f"use the names of {node.module}.api"
                        yield f"{where}:{node.lineno}: from {node.module} import {alias.name}: {fix}"
            elif node.module.split(".")[0] in PUBLIC and node.module not in ALLOWED:
                for alias in node.names:
                    fix = public_name(node.module, alias.name)
                    yield f"{where}:{node.lineno}: from {node.module} import {alias.name}: {fix}"
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] in PUBLIC and alias.name not in ALLOWED:
                    top = alias.name.split(".")[0]
                    yield f"{where}:{node.lineno}: import {alias.name}: use {top}.api's names"
        elif (
            isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Name)
            and node.value.id in PUBLIC
            and node.attr not in {*FROM_TOP, "api"}
        ):
            fix = f"use the names of {node.value.id}.api"  # import engine; engine.runs...
            yield f"{where}:{node.lineno}: {node.value.id}.{node.attr}: {fix}"
        elif (  # a string: monkeypatch.setattr("engine.x.y", ...), a logger's name
            isinstance(node, ast.Constant)
            and isinstance(node.value, str)
            and INTERNAL_PATH.fullmatch(node.value)
        ):
            yield f"{where}:{node.lineno}: {node.value!r} names an internal module: {FIX_PATH}"


def test_the_project_imports_only_public_engine_names() -> None:
    found = [line for path in checked_files() for line in internal_imports(path)]
    assert not found, "engine names outside engine.api:\n" + "\n".join(found)


def test_an_internal_import_is_named_with_its_public_name(tmp_path: Path) -> None:
    """The check itself: a file importing Fit from its module is named, line and fix."""
    module = tmp_path / "loop.py"
    module.write_text(
        "import torch\nfrom engine.runs.fit import Fit\nfrom engine.api import run\n"
        "from engine import __version__, api, training as t\n"
        "import engine\nengine.runs.fit.Fit\nLOGGER = 'engine.training.assemble'\n"
    )
    found = sorted(internal_imports(module, tmp_path))
    assert found == [
        "loop.py:2: from engine.runs.fit import Fit: import it as `from engine.api import Fit`",
        "loop.py:4: from engine import training: use the names of engine.api",
        "loop.py:6: engine.runs: use the names of engine.api",
        f"loop.py:7: 'engine.training.assemble' names an internal module: {FIX_PATH}",
    ]
