"""The engine manual's engine.md: its API section is the engine's public API on one page: one line per name of
engine.api and engine_dev.api, each naming the module it lives in, and the table of the
`_target_`s a config names, as docs/regenerate.py writes it; the README's and docs' code
imports only those names. (tests/test_public_imports.py, which a project copies, checks
train.py, src/ and the copied tests.)"""

from __future__ import annotations

import ast
import importlib
import re
import sys
from pathlib import Path

import pytest

import engine.api
import engine_dev.api

ROOT = Path(__file__).resolve().parents[1]
MANUAL = ROOT / "engine" / "src" / "engine" / "docs"
PAGE = MANUAL / "engine.md"
sys.path.insert(0, str(ROOT / "docs"))
from regenerate import target_table  # noqa: E402

LISTED = re.compile(
    r"^- `(\w+)` — ([\w.]+)(?: \(`(\w+)`\))?: ", re.M
)  # name — module (`its name`):
DEV_LIST = "`engine_dev.api`, for your tests"
TARGETS = re.compile(r"<!-- output: targets -->\n```text\n(.*?)\n```", re.S)
CODE_BLOCK = re.compile(r"```python\n(.*?)```", re.S)


def listed() -> list[tuple[str, str, str]]:
    """(package, name, where it lives) of each line of the page's API lists; a module is
    named within its package, or from `engine.` where engine_dev.api re-exports the engine's."""
    text = PAGE.read_text()
    split = text.index(DEV_LIST)
    return [
        ("engine_dev" if match.start() > split else "engine", name, f"{module}.{own or name}")
        for match in LISTED.finditer(text)
        for name, module, own in [match.groups()]
    ]


def test_the_page_lists_each_api_name_once_where_it_lives() -> None:
    found = {(top, name) for top, name, _ in listed()}
    assert len(found) == len(listed())  # each once
    apis = {"engine": engine.api, "engine_dev": engine_dev.api}
    expected = {(top, name) for top, api in apis.items() for name in api.__all__}
    assert found == expected, f"missing: {expected - found}; not in the api: {found - expected}"
    for top, name, where in listed():
        full = where if where.startswith("engine.") else f"{top}.{where}"
        module, own = full.rsplit(".", 1)
        assert getattr(importlib.import_module(module), own) is getattr(apis[top], name), where


def test_the_target_table_is_generated() -> None:
    """`make docs-outputs NAMES=targets` rewrites it: every `_target_` of conf/ and of the
    engine's own groups, each with the options that name it."""
    (shown,) = TARGETS.findall(PAGE.read_text())
    assert shown == target_table(), "engine.md: run make docs-outputs NAMES=targets"


def test_the_readme_and_docs_import_only_api_names() -> None:
    wrong = []
    for page in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")), *MANUAL.glob("*.md")]:
        for block in CODE_BLOCK.findall(page.read_text()):
            for node in ast.walk(ast.parse(block)):
                if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("engine"):
                    api = {"engine.api": engine.api, "engine_dev.api": engine_dev.api}
                    known = api.get(node.module or "")
                    wrong += [
                        f"{page.name}: from {node.module} import {alias.name}"
                        for alias in node.names
                        if known is None or alias.name not in known.__all__
                    ]
    assert not wrong, f"import these from engine.api: {wrong}"


@pytest.mark.parametrize("api", [engine.api, engine_dev.api], ids=lambda api: api.__name__)
def test_the_api_modules_only_re_export(api) -> None:
    """No logic of their own: imports, `__all__`, nothing else."""
    body = ast.parse(Path(api.__file__).read_text()).body
    kinds = {type(node) for node in body[1:]}  # after the docstring
    assert kinds <= {ast.ImportFrom, ast.Assign}, kinds


def test_the_template_pins_the_engine_it_ships() -> None:
    pyproject = (ROOT / "pyproject.toml").read_text()
    assert f'"hydra-torch-data-engine=={engine.__version__}"' in pyproject
