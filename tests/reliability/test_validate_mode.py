"""mode=validate as this project ships it: its image datasets stop past 1% unreadable files
(conf/dataset/*.yaml's dataset.decode.max_bad_fraction), and its dataset=tensor, which has no
image files to check, is refused. (What mode=validate guarantees on image files, at any
fraction: engine/tests/test_validate_mode.py.)"""

from __future__ import annotations

from pathlib import Path

from engine_dev.hostile import corrupt_tree
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


def test_the_shipped_default_stops_past_one_percent_unreadable(demo_dir, tmp_path) -> None:
    root, _ = corrupt_tree(demo_dir, tmp_path / "tree")  # 3 of 49 train files: 6%
    args = (
        f"paths.demo_dir={demo_dir}",
        f"dataset.root={root}",
        f"hydra.run.dir={tmp_path / 'run'}",
    )
    result = run_cli("mode=validate", *args, cwd=tmp_path)
    assert result.returncode != 0
    assert "3 of 49 train samples are unreadable" in result.stderr
    assert "dataset.decode.max_bad_fraction=0.01" in result.stderr
