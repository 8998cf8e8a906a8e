"""`python train.py --help` lists every config group a run can choose, each with its options:
the engine's (pkg://engine.conf, on hydra.searchpath) as well as the project's conf/, where
Hydra's own help listed conf/'s only (engine/config/help_groups.py)."""

from __future__ import annotations

from importlib import resources
from pathlib import Path

from engine_dev.cli import run_script
from tests.conftest import REFERENCE, TRAIN

ENGINE_CONF_DIR = Path(str(resources.files("engine.conf")))


def _on_disk(folder: Path) -> dict[str, set[str]]:
    """Group (nested ones as hydra/launcher) -> the options its YAML files under `folder` give."""
    found: dict[str, set[str]] = {}
    for file in folder.rglob("*.yaml"):
        if file.parent != folder:
            found.setdefault(file.parent.relative_to(folder).as_posix(), set()).add(file.stem)
    return found


def test_help_lists_the_engines_groups_and_the_projects(tmp_path: Path) -> None:
    said = run_script(TRAIN, "--help", cwd=tmp_path)
    assert said.returncode == 0, said.stderr
    page = said.stdout.split("== Configuration groups ==")[1].split("== Config ==")[0]
    listed = {
        group: set(options.split(", "))
        for group, _, options in (line.partition(": ") for line in page.splitlines())
        if options
    }
    expected = _on_disk(REFERENCE / "conf")
    for group, options in _on_disk(ENGINE_CONF_DIR).items():
        expected.setdefault(group, set()).update(options)
    assert {"eval", "logger", "collate", "hydra/launcher"} <= expected.keys()
    app = {group for group in listed if not group.startswith("hydra/")}
    assert app == {group for group in expected if not group.startswith("hydra/")}
    for group, options in expected.items():  # Hydra's own groups add its options (basic, ...)
        assert options <= listed[group] if group.startswith("hydra/") else options == listed[group]
    assert {"basic", "local", "slurm"} <= listed["hydra/launcher"]
