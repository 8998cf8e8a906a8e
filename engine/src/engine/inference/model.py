"""The model of a checkpoint, rebuilt from the checkpoint alone (its config names the model and
holds the values the training took from its data)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch
from hydra.utils import instantiate
from torch import nn

from engine.config.allowlist import shipped_entries
from engine.config.errors import ConfigError
from engine.config.validate import check_targets
from engine.inference.checkpoint import checkpoint_file, saved_config
from engine.inference.labeller import Labeller
from engine.inference.preprocess import Preprocess
from engine.inference.project import PROJECT_CONFIG, find_project, importable, missing_project
from engine.runs.checkpoint_files import CheckpointError, load_checkpoint


def rebuild_model(config: dict[str, Any], state: dict[str, Any], file: Path) -> nn.Module:
    """The model `config` describes (its `_target_`s already admitted) with the weights of
    checkpoint `state`, in eval mode on the CPU; a mismatch is an error naming `file`."""
    if not isinstance(state.get("model"), dict):
        raise CheckpointError(
            f"{file} holds no model weights (its 'model' is a {type(state.get('model')).__name__}"
            "): it is not a checkpoint written by train.py (mode=train) of this project."
        )
    model = instantiate(config["model"])
    if not isinstance(model, nn.Module):
        raise CheckpointError(
            f"{file}: its model config builds a {type(model).__name__}, not a torch module."
        )
    ours = model.state_dict()
    for key, value in state["model"].items():
        if key in ours and not (isinstance(value, torch.Tensor) and value.dtype == ours[key].dtype):
            kind = value.dtype if isinstance(value, torch.Tensor) else type(value).__name__
            raise CheckpointError(
                f"{file}: its weight {key} is {kind}, the model's is {ours[key].dtype}: it was "
                "not written by train.py for this model."
            )
    try:
        model.load_state_dict(state["model"])
    except RuntimeError as err:
        detail = " ".join(line.strip() for line in str(err).strip().splitlines()[1:3])
        raise CheckpointError(
            f"{file}: its weights do not fit the model its config describes ({detail[:300]}); "
            "was model.* overridden?"
        ) from err
    return model.eval()


class Predict:
    """`model.predict(*inputs)`: the model's labels and scores of an input batch, decoded by
    `model.labeller` as it is at the call (so a changed threshold applies)."""

    def __init__(self, model: nn.Module) -> None:
        self.model = model

    @torch.no_grad()
    def __call__(self, *inputs: torch.Tensor) -> tuple[list[list[str]], torch.Tensor]:
        return self.model.labeller.decode(self.model(*inputs))


def load_model(
    path: str | Path,
    allowed_targets: list[str] | None = None,
    project_root: str | Path | None = None,
    threshold: float | None = None,
) -> nn.Module:
    """The model of a checkpoint, ready for inference, from the checkpoint alone::

        from engine.inference import load_model
        model = load_model("outputs/runs/2026-05-01/12-00-00_ab12cd")  # its best.pt

    `path`: a checkpoint file, or a run dir (its best.pt, else last.pt). The model comes back
    in eval mode on the CPU, with `model.classes` (output i is class `classes[i]`),
    `model.preprocess` (image files, PIL images or uint8 tensors, one or a list -> the input
    batch: the training's val transforms and normalisation), `model.multi_label` (the saved
    dataset.multi_label), `model.labeller` (an engine.inference.labeller.Labeller: its
    `threshold`, and `decode(logits) -> (labels, scores)` as mode=predict labels: softmax and
    the top class, or sigmoid and every class above the threshold) and `model.predict(*inputs)`
    (the same from inputs), so `model.predict(model.preprocess("cat.jpg"))[0]` names the
    classes. `threshold` (multi-label only) replaces the saved metrics.threshold (0.5 when it
    has none); `model.labeller.threshold = 0.3` changes it later. Works from any working
    directory: the project (`project_root`; by default found from $PROJECT_ROOT, the saved
    paths.root_dir or the folders above the checkpoint) is put on sys.path for the template's
    `src.*` targets. The checkpoint's `_target_`s must be in `allowed_targets` (default: the
    project's conf/config.yaml's); the file is read with weights_only=True, so nothing in it
    runs."""
    file = checkpoint_file(path, "load_model")
    state = load_checkpoint(file)
    config = saved_config(state, file)
    root = find_project(config, file, project_root)
    if allowed_targets is None:
        if root is None:
            raise missing_project(file)
        allowed_targets = shipped_entries(root / PROJECT_CONFIG)
    if root is not None:
        importable(root)
    try:
        check_targets(
            {"model": config["model"], "transforms": config["transforms"]}, allowed_targets
        )
    except ConfigError as err:
        raise CheckpointError(f"{file}: its saved config is refused: {err}") from None
    model = rebuild_model(config, state, file)
    try:
        labeller = Labeller.from_config(config, threshold, "threshold")
    except ConfigError as err:
        raise CheckpointError(f"{file}: {err}") from None
    model.classes = labeller.classes
    model.multi_label = labeller.multi_label
    model.labeller = labeller
    model.predict = Predict(model)
    model.preprocess = Preprocess(instantiate(config["transforms"]))
    return model
