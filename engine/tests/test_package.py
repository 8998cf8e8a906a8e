"""The engine is a distribution of its own: its wheel builds from this folder alone and holds
every module, config file and page under src/ (engine, what a run imports, with its manual and
CHANGELOG; engine_dev, the demo data and test fixtures), its tests left out."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

import engine

ENGINE = Path(__file__).resolve().parents[1]


@pytest.mark.process
def test_the_wheel_builds_alone_and_holds_every_module(tmp_path: Path) -> None:
    source = tmp_path / "engine"  # a copy: the build writes build/ and egg-info beside it
    shutil.copytree(
        ENGINE, source, ignore=shutil.ignore_patterns("__pycache__", "build", "*.egg-info")
    )
    command = [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation"]
    subprocess.run([*command, str(source), "-w", str(tmp_path)], check=True, capture_output=True)
    (wheel,) = tmp_path.glob("hydra_torch_data_engine-*.whl")
    assert wheel.name.startswith(f"hydra_torch_data_engine-{engine.__version__}-py3-none-any")
    kept = (".py", ".yaml", ".md", ".png")  # .md, .png: the manual (engine/docs/), the CHANGELOG
    packed = {name for name in zipfile.ZipFile(wheel).namelist() if name.endswith(kept)}
    sources = ENGINE / "src"
    files = {
        path.relative_to(sources).as_posix()
        for path in sources.rglob("*")
        if path.suffix in kept and "__pycache__" not in path.parts
    }
    assert packed == files
    assert not any(name.startswith("tests/") for name in packed)


def test_the_manuals_links_lead_to_files_the_wheel_holds() -> None:
    """An installed manual has no template repo around it: each relative link of a page
    resolves inside the package (a page, an image, a module), so none leads nowhere there."""
    manual = ENGINE / "src" / "engine" / "docs"
    package = manual.parent.resolve()
    dead = []
    for page in sorted(manual.glob("*.md")):
        for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", page.read_text()):
            if "://" in target or target.startswith("mailto:"):
                continue
            path = (page.parent / target).resolve()
            if not path.is_relative_to(package) or not path.exists():
                dead.append(f"{page.name}: {target}")
    assert not dead, dead
