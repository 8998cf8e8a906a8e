"""Self-contained checkpoints, on the reference project: the config saved with a run holds what
it took from its data; `load_model` refuses what is not a checkpoint of this project, says to
pass project_root when it cannot find the project, and preprocesses with the run's own eval
transforms (files, PIL images and tensors alike: test_preprocess_inputs.py). Hostile
checkpoints: test_hostile_checkpoints.py; each of the template's model kinds rebuilt in a fresh
interpreter: the template's tests/process/test_load_model_processes.py."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import torch
import yaml

from engine.api import load_model
from engine.inference.checkpoint import checkpoint_file
from engine.runs.checkpoint_files import CheckpointError, load_checkpoint
from reference.loop import train
from tests.conftest import REFERENCE

ONE_STEP = ("trainer.max_epochs=1", "trainer.limit_train_batches=1", "trainer.limit_val_batches=1")
CLASSES = ["circle", "cross", "square", "star", "triangle"]  # the demo set's


def _load(file: Path, **kwargs: object) -> torch.nn.Module:
    """load_model of `file` with the reference project's code and allowed targets."""
    return load_model(file, project_root=REFERENCE, **kwargs)


def test_config_holds_the_data_values(reference_cfg) -> None:
    cfg = reference_cfg("run", *ONE_STEP)
    train(cfg)
    run = Path(cfg.paths.output_dir)
    resolved = yaml.safe_load((run / "config_resolved.yaml").read_text())
    assert resolved["model"]["num_classes"] == 5
    assert resolved["model"]["input_shape"] == [3, 32, 32]  # after the small transforms
    assert resolved["data"]["classes"] == CLASSES
    assert resolved["data"]["class_counts"] == [12, 10, 10, 8, 8]
    state = load_checkpoint(run / "checkpoints" / "last.pt")
    assert state["config"]["model"] == resolved["model"]
    assert checkpoint_file(run, "eval.checkpoint").name == "best.pt"


def test_load_model_refuses_what_is_not_a_checkpoint_of_this_project(tmp_path) -> None:
    torch.save({"model": {}}, tmp_path / "other.pt")
    with pytest.raises(CheckpointError, match=r"other\.pt holds no training config"):
        _load(tmp_path / "other.pt")
    with pytest.raises(CheckpointError, match=r"holds no best\.pt or last\.pt"):
        _load(tmp_path)
    torch.save([1, 2, 3], tmp_path / "list.pt")
    with pytest.raises(CheckpointError, match=r"list\.pt holds a list, not a checkpoint"):
        _load(tmp_path / "list.pt")
    config = {
        "model": {"_target_": "reference.parts.TinyNet", "num_classes": 2},
        "transforms": {},
        "data": {"classes": ["a", "b"]},
    }
    torch.save({"model": [1], "config": config}, tmp_path / "no_weights.pt")
    with pytest.raises(CheckpointError, match=r"no_weights\.pt holds no model weights \(its "):
        _load(tmp_path / "no_weights.pt")


def test_load_model_without_its_project_says_to_pass_project_root(
    reference_cfg, tmp_path, monkeypatch
) -> None:
    cfg = reference_cfg("run", *ONE_STEP, "paths.root_dir=.")  # relative: no folder elsewhere
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
    model = load_model(alone / "m.pt", project_root=REFERENCE)
    assert model.classes == CLASSES
    one = model.preprocess(torch.randint(0, 256, (3, 60, 70), dtype=torch.uint8))
    assert one.shape == (1, 3, 32, 32) and one.dtype == torch.float32  # the run's transforms
