"""`make new-project` and the README's "Make it yours" walk-through, run in a fresh copy."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SECTION = re.compile(r"## Make it yours\n(.*?)\n## ", re.S)
# a fenced block whose first comment (after an optional Hydra package header) names its file
FILE_BLOCK = re.compile(
    r"```(?:python|yaml)\n((?:# @package \S+\n)?)# ((?:src|conf)/\S+)\n(.*?)```", re.S
)
COMMANDS = re.compile(r"```bash\n# in the new project\n(.*?)```", re.S)


def walkthrough() -> tuple[list[tuple[str, str]], list[str]]:
    """The README section's files (path, content) and its shell commands, in order."""
    section = SECTION.search((ROOT / "README.md").read_text()).group(1)  # type: ignore[union-attr]
    files = [
        (path, f"{header}# {path}\n{body}") for header, path, body in FILE_BLOCK.findall(section)
    ]
    commands = COMMANDS.search(section).group(1).strip().splitlines()  # type: ignore[union-attr]
    return files, commands


def test_readme_walkthrough_is_complete() -> None:
    files, commands = walkthrough()
    assert [p for p, _ in files] == [
        "src/data/datasets/my_listing.py", "conf/dataset/my_listing.yaml",
        "src/models/tiny.py", "conf/model/tiny.yaml", "conf/experiment/my_first.yaml",
    ]  # fmt: skip
    assert commands[-1] == "make test"


@pytest.mark.slow
@pytest.mark.process
def test_new_project_passes_its_own_tests_with_the_walkthrough(tmp_path: Path) -> None:
    dest = tmp_path / "my-project"
    subprocess.run(["make", "new-project", f"DEST={dest}"], cwd=ROOT, check=True)
    assert not (dest / ".git").exists() and not (dest / ".venv").exists()
    assert not (dest / "data").exists() and sorted((dest / "outputs").iterdir()) == [
        dest / "outputs" / ".gitkeep"
    ]
    files, commands = walkthrough()
    for path, content in files:
        (dest / path).write_text(content)
    for command in commands:
        result = subprocess.run(command, shell=True, cwd=dest, capture_output=True, text=True,
                                timeout=1500)  # fmt: skip
        assert result.returncode == 0, f"{command}\n{result.stdout[-2000:]}{result.stderr[-3000:]}"
