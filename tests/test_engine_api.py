"""The engine manual's engine.md is the engine's public API: every name it lists imports, and the template
(src/, train.py, conf/, the README and docs' code) uses no other name of the engine."""

from __future__ import annotations

import ast
import importlib
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
MANUAL = ROOT / "engine" / "src" / "engine" / "docs"
LISTED = re.compile(r"^- `(engine(?:_dev)?\.[\w.]+)` — ", re.M)
CODE_BLOCK = re.compile(r"```python\n(.*?)```", re.S)
TARGET = re.compile(r"_target_: (engine\.[\w.]+)")


def listed() -> list[str]:
    return LISTED.findall((MANUAL / "engine.md").read_text())


def _resolve(name: str) -> object:
    """The object a dotted name means: a module, or an attribute of the longest module."""
    parts = name.split(".")
    for end in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:end]))
        except ModuleNotFoundError:
            continue
        for attr in parts[end:]:
            obj = getattr(obj, attr)
        return obj
    raise ModuleNotFoundError(name)


def _imports(source: str) -> set[str]:
    """`engine.x.y.Name` for every `from engine.x.y import Name` in `source`."""
    names = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("engine"):
            names |= {f"{node.module}.{alias.name}" for alias in node.names}
    return names


def used_by_the_template() -> set[str]:
    """The engine names the template imports or configures."""
    used = set()
    for path in [ROOT / "train.py", *sorted((ROOT / "src").rglob("*.py"))]:
        used |= _imports(path.read_text())
    for page in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")), *MANUAL.glob("*.md")]:
        for block in CODE_BLOCK.findall(page.read_text()):
            used |= _imports(block)
    for path in sorted((ROOT / "conf").rglob("*.yaml")):
        used |= set(TARGET.findall(path.read_text()))
    return used


@pytest.mark.parametrize("name", listed())
def test_every_listed_name_imports(name: str) -> None:
    assert _resolve(name) is not None


def test_the_list_has_each_name_once() -> None:
    names = listed()
    assert len(names) > 40 and len(names) == len(set(names))


def test_the_template_uses_only_listed_names() -> None:
    unlisted = sorted(used_by_the_template() - set(listed()))
    assert not unlisted, f"not in engine.md's public API: {unlisted}"


def test_the_tests_a_project_copies_import_only_listed_names() -> None:
    """A project's own suite (what `make new-project` copies) imports only listed names, so an
    engine upgrade that keeps its public API never breaks a user's tests."""
    from tools.new_project import template_suite

    used = set()
    for path in sorted(template_suite(ROOT)):
        used |= _imports((ROOT / path).read_text())
    unlisted = sorted(used - set(listed()))
    assert not unlisted, f"the copied tests import names not in engine.md: {unlisted}"


def test_the_template_pins_the_engine_it_ships() -> None:
    import engine

    pyproject = (ROOT / "pyproject.toml").read_text()
    assert f'"hydra-torch-data-engine=={engine.__version__}"' in pyproject
