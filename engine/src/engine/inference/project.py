"""The project a checkpoint was trained in, for `load_model` from any working directory: its
conf/config.yaml gives the allowed `_target_`s, and its folder must be importable for the
saved config's `src.*` targets (a notebook elsewhere has neither on its path)."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

from engine.config.allowlist import project_config
from engine.runs.checkpoint_files import CheckpointError

PROJECT_CONFIG = Path("conf") / "config.yaml"  # what marks a project's root


def _is_project(folder: Path) -> bool:
    return (folder / PROJECT_CONFIG).is_file()


def _candidates(config: dict[str, Any], file: Path) -> list[Path]:
    """Where the project may be, most specific first: $PROJECT_ROOT (train.py's), the folders
    above the checkpoint (a run dir lies under <root>/outputs/: what holds the file is trusted
    before what the file says), the saved paths.root_dir (where it was trained, for outputs
    kept elsewhere), the checkout this engine sits in."""
    paths = config.get("paths")
    saved = paths.get("root_dir") if isinstance(paths, dict) else None
    found = [Path(os.environ["PROJECT_ROOT"])] if "PROJECT_ROOT" in os.environ else []
    found += file.resolve().parents
    if isinstance(saved, str) and Path(saved).is_absolute():
        found.append(Path(saved))
    return [*found, project_config().parent.parent.resolve()]


def find_project(config: dict[str, Any], file: Path, given: str | Path | None) -> Path | None:
    """The root of the project checkpoint `file` (saved config `config`) belongs to: `given`
    (load_model's project_root), else the first of `_candidates` holding conf/config.yaml,
    else None."""
    if given is not None:
        root = Path(given).expanduser().resolve()
        if not _is_project(root):
            raise CheckpointError(
                f"load_model(project_root={given!s}): {root / PROJECT_CONFIG} does not exist; "
                "pass the checkout that trained the model (the folder holding conf/ and src/)."
            )
        return root
    for folder in _candidates(config, file):
        if _is_project(folder):
            return folder.resolve()
    return None


def missing_project(file: Path) -> CheckpointError:
    """The error of a checkpoint whose project was not found, with the fix."""
    return CheckpointError(
        f"{file}: cannot find the project it was trained in (no {PROJECT_CONFIG} at "
        "$PROJECT_ROOT, above the checkpoint, at its saved paths.root_dir or beside this "
        "engine): pass load_model(..., project_root='<the checkout holding conf/ and src/>')."
    )


def importable(root: Path) -> None:
    """Put `root` first on sys.path (once), as train.py's folder is, so the saved config's
    targets of the template (src.models.*) import from that project."""
    if str(root) not in sys.path:
        sys.path.insert(0, str(root))
