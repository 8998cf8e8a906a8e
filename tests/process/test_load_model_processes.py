"""load_model in a fresh interpreter (a child process, as a notebook or a service would start):
each shipped model kind rebuilt from its checkpoint file alone, and its project found from any
working directory (the in-process checks: tests/test_load_model.py)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import torch

from engine.inference import load_model
from src.loop import train
from tests.test_load_model import ONE_STEP

ROOT = Path(__file__).resolve().parents[2]
KINDS = {
    "small_cnn": (),
    "resnet18": ("model=resnet18",),
    "mlp": ("model=mlp", "dataset=tensor", "transforms=none"),
    "gru": ("model=gru", "dataset=sequences", "collate=pad", "transforms=none"),
}
# In a fresh process, with only the checkpoint files in its folder: rebuild each model and run
# it on a fixed input (images through model.preprocess; token ids for the GRU).
FRESH = """
import sys, torch
from engine.inference import load_model
for name in sys.argv[1:]:
    model = load_model(f"{name}.pt")
    torch.manual_seed(0)
    if name == "gru":
        lengths = torch.tensor([7, 4])
        args = (torch.randint(1, 20, (2, 7)), lengths, torch.arange(7) < lengths[:, None])
    elif name == "mlp":
        args = (torch.randn(2, *model.net[1].weight.shape[1:]),)
    else:
        args = (model.preprocess([torch.randint(0, 256, (3, 60, 70), dtype=torch.uint8)] * 2),)
    with torch.no_grad():
        torch.save({"classes": model.classes, "logits": model(*args), "args": args}, f"{name}.out")
"""

# A notebook somewhere else: the engine importable, the template's src/ not (nothing of the
# project on sys.path, another working directory); load_model must find the project itself.
ELSEWHERE = """
import importlib.util, sys, torch
sys.path.insert(0, sys.argv[1])
from engine.inference import load_model
sys.path.remove(sys.argv[1])
assert importlib.util.find_spec("src") is None
model = load_model(sys.argv[2])
print(sys.modules[type(model).__module__].__file__)
"""


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
