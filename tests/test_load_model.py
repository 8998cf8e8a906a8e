"""Self-contained checkpoints: the config saved with a run holds what it took from its data, and
`load_model(path)` rebuilds every shipped model kind from a checkpoint alone."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import yaml

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
        timeout=300,
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
