"""Self-contained checkpoints: the config saved with a run holds what it took from its data, and
`load_model(path)` rebuilds every shipped model kind from a checkpoint alone."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
import yaml
from PIL import Image

from engine.inference import load_model
from engine.inference.checkpoint import checkpoint_file
from engine.runs.checkpoint_files import CheckpointError, load_checkpoint
from src.loop import train

ROOT = Path(__file__).resolve().parents[1]
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


def test_config_holds_the_data_values(make_cfg) -> None:
    cfg = make_cfg(*ONE_STEP)
    train(cfg)
    run = Path(cfg.paths.output_dir)
    resolved = yaml.safe_load((run / "config_resolved.yaml").read_text())
    assert resolved["model"]["num_classes"] == 5
    assert resolved["model"]["input_shape"] == [3, 48, 48]
    assert resolved["data"]["classes"] == ["circle", "cross", "square", "star", "triangle"]
    assert resolved["data"]["class_counts"] == [12, 10, 10, 8, 8]
    state = load_checkpoint(run / "checkpoints" / "last.pt")
    assert state["config"]["model"] == resolved["model"]
    assert checkpoint_file(run, "eval.checkpoint").name == "best.pt"


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


def test_load_model_refuses_what_is_not_a_checkpoint_of_this_project(tmp_path) -> None:
    torch.save({"model": {}}, tmp_path / "other.pt")
    with pytest.raises(CheckpointError, match=r"other\.pt holds no training config"):
        load_model(tmp_path / "other.pt")
    with pytest.raises(CheckpointError, match=r"holds no best\.pt or last\.pt"):
        load_model(tmp_path)
    torch.save([1, 2, 3], tmp_path / "list.pt")
    with pytest.raises(CheckpointError, match=r"list\.pt holds a list, not a checkpoint"):
        load_model(tmp_path / "list.pt")
    config = {
        "model": {"_target_": "src.models.small_cnn.SmallCNN", "num_classes": 2},
        "transforms": {},
        "data": {"classes": ["a", "b"]},
    }
    torch.save({"model": [1], "config": config}, tmp_path / "no_weights.pt")
    with pytest.raises(CheckpointError, match=r"no_weights\.pt holds no model weights \(its "):
        load_model(tmp_path / "no_weights.pt")


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


def test_load_model_without_its_project_says_to_pass_project_root(
    make_cfg, tmp_path, monkeypatch
) -> None:
    cfg = make_cfg(*ONE_STEP, "paths.root_dir=.")  # relative: names no folder once elsewhere
    train(cfg)
    alone = tmp_path / "alone"
    alone.mkdir()
    shutil.copy(Path(cfg.paths.output_dir) / "checkpoints" / "last.pt", alone / "m.pt")
    monkeypatch.chdir(alone)
    monkeypatch.setenv("PROJECT_ROOT", str(alone))  # where train.py would say; no conf/ there
    with pytest.raises(CheckpointError, match=r"m\.pt: cannot find the project .*project_root="):
        load_model(alone / "m.pt")
    with pytest.raises(CheckpointError, match=r"project_root=.*alone/conf/config\.yaml does not"):
        load_model(alone / "m.pt", project_root=alone)
    model = load_model(alone / "m.pt", project_root=ROOT)
    assert model.classes == ["circle", "cross", "square", "star", "triangle"]


def test_preprocess_takes_files_pil_images_and_tensors_alike(make_cfg, tmp_path) -> None:
    cfg = make_cfg(*ONE_STEP)
    train(cfg)
    model = load_model(Path(cfg.paths.output_dir))
    pixels = torch.randint(0, 256, (3, 60, 70), dtype=torch.uint8)
    picture = Image.fromarray(pixels.permute(1, 2, 0).numpy())
    picture.save(tmp_path / "a.png")
    one = model.preprocess(pixels)
    assert one.shape == (1, 3, 48, 48) and one.dtype == torch.float32
    forms = {
        "str": str(tmp_path / "a.png"),
        "Path": tmp_path / "a.png",
        "PIL": picture,
        "RGBA PIL": picture.convert("RGBA"),  # converted to RGB, as files are decoded
        "HWC tensor": pixels.permute(1, 2, 0),
        "HWC array": pixels.permute(1, 2, 0).numpy(),  # as cv2 and np.asarray(pil) give them
    }
    for name, image in forms.items():
        assert torch.equal(model.preprocess(image), one), name
    hwc = pixels.permute(1, 2, 0).numpy()
    for mode in ("L", "RGBA"):  # an array of each kind: as its PIL image, as its file
        image = Image.fromarray(hwc).convert(mode)
        image.save(tmp_path / f"{mode}.png")
        as_array = model.preprocess(np.asarray(image))
        assert torch.equal(as_array, model.preprocess(image)), mode
        assert torch.equal(as_array, model.preprocess(tmp_path / f"{mode}.png")), mode
    mixed = model.preprocess([*forms.values(), pixels])
    assert torch.equal(mixed, one.expand(len(forms) + 1, -1, -1, -1))
    with pytest.raises(TypeError, match=r"image 1 is a torch\.float32 tensor .* uint8 tensors or"):
        model.preprocess([pixels, pixels.float()])
