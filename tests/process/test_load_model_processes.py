"""load_model in a fresh interpreter: each kind rebuilt from the checkpoint alone, and its project found from any working directory."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import torch

from engine.inference import load_model
from src.loop import train
from tests.test_load_model import ELSEWHERE, FRESH, KINDS, ONE_STEP, ROOT


def test_load_model_rebuilds_each_kind_from_the_checkpoint_alone(make_cfg, tmp_path) -> None:
    alone = tmp_path / "alone"
    alone.mkdir()
    for name, overrides in KINDS.items():
        cfg = make_cfg(*ONE_STEP, *overrides, f"paths.output_dir={tmp_path / name}")
        train(cfg)
        shutil.copy(tmp_path / name / "checkpoints" / "last.pt", alone / f"{name}.pt")
        shutil.rmtree(tmp_path / name)  # nothing of the run is left but the checkpoint copy
    result = subprocess.run(
        [sys.executable, "-c", FRESH, *KINDS],
        cwd=alone,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    for name in KINDS:
        out = torch.load(alone / f"{name}.out", weights_only=True)
        model = load_model(alone / f"{name}.pt")  # the same weights, here: the same outputs
        with torch.no_grad():
            expected = model(*out["args"])
        assert torch.allclose(out["logits"], expected, atol=1e-5), name
        assert out["logits"].shape == (2, len(out["classes"]))


def test_load_model_finds_its_project_from_any_working_directory(make_cfg, tmp_path) -> None:
    project = tmp_path / "project"  # a copy of the template, where the model is trained
    for part in ("conf", "src"):
        shutil.copytree(ROOT / part, project / part)
    run = project / "outputs" / "run"
    train(make_cfg(*ONE_STEP, f"paths.root_dir={project}", f"paths.output_dir={run}"))
    (tmp_path / "notebooks").mkdir()

    def model_module(checkpoint: Path) -> Path:
        result = subprocess.run(
            [sys.executable, "-c", ELSEWHERE, str(ROOT), str(checkpoint)],
            cwd=tmp_path / "notebooks",
            env={"PATH": "/usr/bin:/bin"},
            capture_output=True,
            text=True,
            check=False,
        )
        assert result.returncode == 0, result.stderr[-3000:]
        return Path(result.stdout.strip())

    alone = tmp_path / "alone.pt"  # nothing above it: its saved paths.root_dir names the project
    shutil.copy(run / "checkpoints" / "last.pt", alone)
    assert model_module(alone).is_relative_to(project / "src")
    moved = project.rename(tmp_path / "moved")  # paths.root_dir is gone: the run dir's location
    assert model_module(moved / "outputs" / "run").is_relative_to(moved / "src")
