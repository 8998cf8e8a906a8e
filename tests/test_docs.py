"""README.md, docs/ and the engine's manual: every shown output is made by docs/regenerate.py, every command composes
into a valid config (or names a make target that exists), every relative link resolves."""

from __future__ import annotations

import importlib.util
import re
import shlex
import sys
from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir

from engine.config.validate import validate_config
from tests.conftest import CONF_DIR

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "docs"))
from regenerate import OUTPUTS, PAGES  # noqa: E402

BASH = re.compile(r"```bash\n(.*?)```", re.S)
MARKER = re.compile(r"<!-- output: ([\w-]+) -->\n(```\w*)\n")
LINK = re.compile(r"\]\(([^)#\s]+)(#[^)]*)?\)")
MAKE_TARGET = re.compile(r"^([a-z-]+):", re.M)


def commands() -> list[tuple[str, str]]:
    """(page, command line) of every command in the pages' bash blocks, continuations joined,
    comments dropped; the README walk-through's 'in the new project' block is the slow
    new-project test's."""
    found = []
    for page in PAGES:
        for block in BASH.findall(page.read_text()):
            if block.startswith("# in the new project"):
                continue
            for line in block.replace("\\\n", " ").splitlines():
                line = line.split(" #", 1)[0].strip()
                if line and not line.startswith("#"):
                    found.append((str(page.relative_to(ROOT)), line))
    return found


def test_every_shown_output_is_regenerated_and_every_generator_shown() -> None:
    shown = {}
    for page in PAGES:
        for name, fence in MARKER.findall(page.read_text()):
            assert fence == "```text", f"{page.name}: output {name} is not a ```text block"
            shown[name] = page.name
    assert set(shown) <= set(OUTPUTS), f"markers without a generator: {set(shown) - set(OUTPUTS)}"
    assert set(OUTPUTS) <= set(shown), f"generators never shown: {set(OUTPUTS) - set(shown)}"


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_relative_links_resolve(page: Path) -> None:
    for target, _ in LINK.findall(page.read_text()):
        if not target.startswith(("http://", "https://")):
            assert (page.parent / target).exists(), f"{page.name}: broken link {target}"


def _overrides(words: list[str]) -> list[str]:
    """The Hydra overrides of a train.py command line, a sweep's first value of each list."""
    overrides = []
    for word in words:
        if word in ("-m", "--multirun") or "=" not in word:
            continue
        key, _, value = word.partition("=")
        sweep = "," in value and not value.startswith(("[", "{", "'", '"'))
        overrides.append(f"{key}={value.split(',')[0]}" if sweep else word)
    return overrides


@pytest.mark.parametrize(("page", "line"), commands())
def test_every_command_composes_and_validates(page: str, line: str, tmp_path: Path) -> None:
    words = shlex.split(line)
    if words[0] == "make":
        targets = set(MAKE_TARGET.findall((ROOT / "Makefile").read_text()))
        assert words[1] in targets, f"{page}: make {words[1]} is not a Makefile target"
        return
    if words[:2] == ["python", "-m"]:  # a module installed here, e.g. engine.data.shards.serve
        assert importlib.util.find_spec(words[2]), f"{page}: python -m {words[2]}: no such module"
        return
    assert "train.py" in words, f"{page}: {line!r} is neither make, python -m nor train.py"
    overrides = _overrides(words[words.index("train.py") + 1 :])
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        cfg = compose(config_name="config", overrides=[*overrides, f"paths.output_dir={tmp_path}"])
    validate_config(cfg)
