"""mode=validate refuses this project's dataset=tensor, which has no image files to check.
(What mode=validate guarantees on image files: engine/tests/test_validate_mode.py.)"""

from __future__ import annotations

from pathlib import Path

from tests.cli import run_cli


def test_validate_refuses_datasets_without_files(tmp_path: Path) -> None:
    run = tmp_path / "run"
    result = run_cli(
        "mode=validate",
        "dataset=tensor",
        "transforms=none",
        "model=mlp",
        f"hydra.run.dir={run}",
        cwd=tmp_path,
    )
    assert result.returncode == 1
    assert "ValueError: mode=validate checks image files, and " in result.stderr
    assert "use it with dataset=imagefolder or dataset=csv" in result.stderr
