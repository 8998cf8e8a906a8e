"""The engine manual's reliability.md table only cites tests that exist (a bare file name is one of
tests/reliability/, a path is from the checkout's root; `::name` is of the file cited before it)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_every_cited_test_exists() -> None:
    page = (ROOT / "engine" / "src" / "engine" / "docs" / "reliability.md").read_text()
    section = page.split("| guarantee | proved by |", 1)[1].split("\n\n", 1)[0] + "\n"
    rows = [line for line in section.splitlines() if line.startswith("| ") and "---" not in line]
    cells = re.findall(r"\| (`(?:[\w/]+/)?test_[^|]+) \|\n", section)
    assert len(cells) == len(rows), "a row's proof does not begin with the test that proves it"
    cited = 0
    for cell in cells:
        module = None
        for ref in re.findall(r"`([^`]+)`", cell):
            if ".py" not in ref and not ref.startswith("::"):
                continue  # a command (`make test-slow`), not a test
            file, _, name = ref.partition("::")
            module = file or module
            folder = ROOT if "/" in module else ROOT / "tests" / "reliability"
            source = (folder / module).read_text()
            if name:
                assert f"def {name}(" in source, ref
            cited += 1
    assert cited >= 100  # every row's, by bare name or path
