"""load_model in a fresh interpreter (a child process, as a notebook or a service would start):
each shipped model kind rebuilt from its checkpoint file alone, and its code taken from the
project pointed at from any working directory, never from one the checkpoint names (the
in-process checks: engine/tests/test_load_model.py, engine/tests/test_hostile_checkpoints.py)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import torch

from engine.api import load_model
from engine.runs.checkpoint_files import save_checkpoint
from engine_dev.api import load_checkpoint
from src.loop import train

ROOT = Path(__file__).resolve().parents[2]
ONE_STEP = ("trainer.max_epochs=1", "trainer.limit_train_batches=1", "trainer.limit_val_batches=1")
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


def test_load_model_takes_its_code_from_the_project_pointed_at(make_cfg, tmp_path) -> None:
    """The code comes from $PROJECT_ROOT, the working directory's project or this engine's
    checkout, never from where the checkpoint says it was trained (its saved paths.root_dir)
    nor from where it lies; the checkpoint's project and the one used differing is one
    warning line naming both."""
    project = tmp_path / "project"  # a copy of the template, where the model is trained
    for part in ("conf", "src"):
        shutil.copytree(ROOT / part, project / part)
    run = project / "outputs" / "run"
    train(make_cfg(*ONE_STEP, f"paths.root_dir={project}", f"paths.output_dir={run}"))
    (tmp_path / "notebooks").mkdir()

    def model_module(checkpoint: Path, cwd: Path, **env: str) -> tuple[Path, str]:
        result = subprocess.run(
            [sys.executable, "-c", ELSEWHERE, str(ROOT), str(checkpoint)],
            cwd=cwd,
            env={"PATH": "/usr/bin:/bin", **env},
            capture_output=True,
            text=True,
            check=False,
        )
        assert result.returncode == 0, result.stderr[-3000:]
        return Path(result.stdout.strip()), result.stderr

    module, said = model_module(run, tmp_path / "notebooks")  # nothing points at the project
    assert module.is_relative_to(ROOT / "src")
    warned = [line for line in said.splitlines() if str(project) in line]
    assert len(warned) == 1 and f"comes from {ROOT} " in warned[0], said[-3000:]
    pointed, said = model_module(run, tmp_path / "notebooks", PROJECT_ROOT=str(project))
    assert pointed.is_relative_to(project / "src") and "trained in" not in said
    inside, said = model_module(run, project / "outputs")  # a notebook in the project
    assert inside.is_relative_to(project / "src") and "trained in" not in said


# From inside the real checkout, as a notebook or service there runs (`python -c` puts the
# working directory on sys.path): which file the model's class came from.
INSIDE = """
import sys
from engine.inference import load_model
model = load_model(sys.argv[1])
print(sys.modules[type(model).__module__].__file__)
"""


def test_a_checkpoint_never_chooses_the_code_load_model_imports(make_cfg, tmp_path) -> None:
    """A checkpoint's saved paths.root_dir named a folder of its sender's: load_model put it
    first on sys.path, and a fresh process inside the real checkout imported that folder's
    src/models/small_cnn.py (here it touches a file). The code is the checkout's."""
    cfg = make_cfg(*ONE_STEP)
    train(cfg)
    sentinel = tmp_path / "SENTINEL"
    planted = tmp_path / "planted"
    for part in ("conf", "src"):
        shutil.copytree(ROOT / part, planted / part, ignore=shutil.ignore_patterns("__pycache__"))
    module = planted / "src" / "models" / "small_cnn.py"
    module.write_text(module.read_text() + f"\nopen({str(sentinel)!r}, 'w').close()\n")
    state = load_checkpoint(Path(cfg.paths.output_dir) / "checkpoints" / "last.pt")
    state["config"]["paths"]["root_dir"] = str(planted)
    (tmp_path / "received").mkdir()
    save_checkpoint(tmp_path / "received" / "model.pt", state)
    result = subprocess.run(
        [sys.executable, "-c", INSIDE, str(tmp_path / "received" / "model.pt")],
        cwd=ROOT,
        env={"PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert not sentinel.exists()
    assert Path(result.stdout.strip()).is_relative_to(ROOT / "src")
    warned = [line for line in result.stderr.splitlines() if str(planted) in line]
    assert len(warned) == 1 and f"comes from {ROOT} " in warned[0], result.stderr[-3000:]
