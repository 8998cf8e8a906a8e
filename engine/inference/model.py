"""The model of a checkpoint, rebuilt from the checkpoint alone (its config names the model and
holds the values the training took from its data)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch
from hydra.utils import instantiate
from torch import nn

from engine.config.allowlist import shipped_entries
from engine.config.errors import ConfigError
from engine.config.validate import check_targets
from engine.data.transforms import Pipelines
from engine.inference.checkpoint import checkpoint_file, saved_config
from engine.runs.checkpoint_files import CheckpointError, load_checkpoint
from engine.runs.outputs import DATA_KEY


class Preprocess:
    """uint8 images (C x H x W tensors, as engine.data.decode.read_image returns them) -> the
    model's input batch: the val transforms of the training, then its normalisation."""

    def __init__(self, pipelines: Pipelines) -> None:
        self.pipelines = pipelines

    def __call__(self, images: torch.Tensor | Sequence[torch.Tensor]) -> torch.Tensor:
        images = [images] if isinstance(images, torch.Tensor) and images.ndim == 3 else images
        val = self.pipelines.val
        batch = torch.stack([val(image) if val is not None else image for image in images])
        return self.pipelines.normalizer(batch)


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


def load_model(path: str | Path, allowed_targets: list[str] | None = None) -> nn.Module:
    """The model of a checkpoint, ready for inference, from the checkpoint alone::

        from engine.inference import load_model
        model = load_model("outputs/runs/2026-05-01/12-00-00_ab12cd")  # its best.pt

    `path`: a checkpoint file, or a run dir (its best.pt, else last.pt). The model comes back
    in eval mode on the CPU, with `model.classes` (output i is class `classes[i]`) and
    `model.preprocess` (uint8 images -> the input batch: the training's val transforms and
    normalisation), so `model(model.preprocess(read_image(f))).argmax(1)` names the class.
    The checkpoint's `_target_`s must be in `allowed_targets` (default: conf/config.yaml's);
    the file is read with weights_only=True, so nothing in it runs."""
    file = checkpoint_file(path, "load_model")
    state = load_checkpoint(file)
    config = saved_config(state, file)
    entries = shipped_entries() if allowed_targets is None else allowed_targets
    try:
        check_targets({"model": config["model"], "transforms": config["transforms"]}, entries)
    except ConfigError as err:
        raise CheckpointError(f"{file}: its saved config is refused: {err}") from None
    model = rebuild_model(config, state, file)
    model.classes = list(config[DATA_KEY]["classes"])
    model.preprocess = Preprocess(instantiate(config["transforms"]))
    return model
