"""The model of a checkpoint, rebuilt from the checkpoint alone (its config names the model and
holds the values the training took from its data)."""

from __future__ import annotations

import logging
import re
from contextlib import nullcontext
from pathlib import Path
from typing import Any

import torch
from hydra._internal.utils import _locate  # what instantiate uses (targets admitted before)
from hydra.utils import instantiate
from torch import nn

from engine.config.allowlist import shipped_entries
from engine.config.errors import ConfigError
from engine.config.tree import target_nodes
from engine.config.validate import check_targets, key_problems
from engine.core.failures import innermost
from engine.data.image_header import MAX_JPEG_SCANS, PILLOW_MAX_PIXELS
from engine.inference.checkpoint import image_sides, read_checkpoint
from engine.inference.labeller import Labeller
from engine.inference.preprocess import Preprocess
from engine.inference.project import PROJECT_CONFIG, find_project, missing_project, project_code
from engine.runs.checkpoint_checks import weights_problem
from engine.runs.checkpoint_files import CheckpointError
from engine.runs.checkpoint_weights import picked_weights, saved_monitor

# what torch and Python say when a build asks for more memory than there is (or than fits)
OUT_OF_MEMORY = re.compile(r"allocat|out of memory|overflow", re.IGNORECASE)
ASKED = re.compile(r"[Tt]ried to allocate ([\d.]+ ?\w+)")  # torch's CPU and CUDA allocators
BUILT = ("model", "transforms")  # the sections of a saved config load_model builds

log = logging.getLogger(__name__)


def _largest(node: Any, path: str) -> tuple[str, int] | None:
    """(dotted key, value) of the largest int under `node`: what most likely asked for it."""
    if isinstance(node, dict):
        items = [(f"{path}.{k}", v) for k, v in node.items()]
    elif isinstance(node, list):
        items = [(f"{path}[{i}]", v) for i, v in enumerate(node)]
    else:
        return (path, node) if isinstance(node, int) and not isinstance(node, bool) else None
    found = [pair for key, value in items if (pair := _largest(value, key)) is not None]
    return max(found, key=lambda pair: pair[1], default=None)


def build(node: dict[str, Any], key: str, file: Path) -> Any:
    """`node` (the `key` node of checkpoint `file`'s config, its targets admitted) built. A
    build that runs out of memory (a saved config asking for a huge model died in a raw
    allocator error) is a CheckpointError naming the file, the key and its largest setting."""
    try:
        return instantiate(node)
    except Exception as err:
        cause = innermost(err)
        if not (isinstance(cause, MemoryError) or OUT_OF_MEMORY.search(str(cause))):
            raise
        largest = _largest(node, key)
        asked = ASKED.search(str(cause))
        raise CheckpointError(
            f"{file}: its saved {key} ({node.get('_target_')}) cannot be built: it asks for "
            f"{asked.group(1) if asked else 'more memory than there is'} "
            f"({type(cause).__name__}); its largest setting is "
            f"{'{}={}'.format(*largest) if largest else 'none'}: was {key}.* changed after "
            "training?"
        ) from err


def _on_meta(node: dict[str, Any]) -> nn.Module | None:
    """The model `node` describes built on the meta device (shapes only, nothing allocated),
    or None where it cannot be (its __init__ computes on tensors): then the real build, which
    `build` guards, reports. Its targets are imported first, outside the meta device, so no
    module-level tensor of theirs is made on it."""
    for target in _targets(node):
        _locate(target)
    try:
        with torch.device("meta"):
            model = instantiate(node)
    except Exception:  # a probe: the real build reports any failure itself
        return None
    return model if isinstance(model, nn.Module) else None


def _targets(*nodes: Any) -> list[str]:
    """Every `_target_` (a string) under `nodes`."""
    return [n["_target_"] for _, n in target_nodes(list(nodes)) if isinstance(n["_target_"], str)]


def rebuild_model(config: dict[str, Any], state: dict[str, Any], file: Path) -> nn.Module:
    """The model `config` describes (its `_target_`s already admitted) with the weights of
    checkpoint `state`, in eval mode on the CPU; a mismatch is an error naming `file`. The
    model is built on the meta device first and must fit the weights the file holds before
    anything is allocated: a saved config cannot ask for more memory than its weights take.
    The weights are the ones its run's monitor measured (a training with trainer.ema.decay
    monitored on val/ema_*: the EMA's; engine/runs/checkpoint_weights.py)."""
    weights, which = picked_weights(state)
    if not isinstance(weights, dict):
        key = "ema']['weights" if which == "EMA" else "model"
        raise CheckpointError(
            f"{file} holds no model weights (its '{key}' is a {type(weights).__name__}"
            "): it is not a checkpoint written by train.py (mode=train) of this project."
        )
    if which == "EMA":
        log.info("%s: the EMA's weights, which its monitor %s scored", file, saved_monitor(state))
    shapes = _on_meta(config["model"])
    problem = weights_problem(weights, shapes.state_dict()) if shapes else None
    if problem is not None:
        largest = _largest(config["model"], "model")
        raise CheckpointError(
            f"{file}: the model its saved config describes is not the one of its weights: "
            f"{problem}; its largest setting is {'{}={}'.format(*largest) if largest else 'none'}"
            ": was model.* changed after training, or overridden?"
        )
    model = build(config["model"], "model", file)
    if not isinstance(model, nn.Module):
        raise CheckpointError(
            f"{file}: its model config builds a {type(model).__name__}, not a torch module."
        )
    ours = model.state_dict()
    for key, value in weights.items():
        if key in ours and not (isinstance(value, torch.Tensor) and value.dtype == ours[key].dtype):
            kind = value.dtype if isinstance(value, torch.Tensor) else type(value).__name__
            raise CheckpointError(
                f"{file}: its weight {key} is {kind}, the model's is {ours[key].dtype}: it was "
                "not written by train.py for this model."
            )
    try:
        model.load_state_dict(weights)
    except RuntimeError as err:
        detail = " ".join(line.strip() for line in str(err).strip().splitlines()[1:3])
        raise CheckpointError(
            f"{file}: its weights do not fit the model its config describes ({detail[:300]}); "
            "was model.* overridden?"
        ) from err
    return model.eval()


class Predict:
    """`model.predict(*inputs)`: the model's labels and scores of an input batch, decoded by
    `model.labeller` as it is at the call (so a changed threshold applies). What the model
    cannot take is one line naming the fix: a uint8 image batch (not yet through
    `model.preprocess`), or one sample without its batch axis (`input_shape`: the saved
    model's, where it has one), where torch's errors named neither."""

    def __init__(self, model: nn.Module, input_shape: list[int] | None = None) -> None:
        self.model, self.input_shape = model, input_shape

    @torch.no_grad()
    def __call__(self, *inputs: torch.Tensor) -> tuple[list[list[str]], torch.Tensor]:
        first = inputs[0] if inputs else None
        if not isinstance(first, torch.Tensor):
            raise TypeError(
                f"model.predict takes a batch tensor, not {type(first).__name__}: "
                "model.predict(model.preprocess(images)); preprocess takes files, PIL images "
                "and uint8 tensors, one or a list."
            )
        if first.dtype == torch.uint8:
            raise TypeError(
                f"model.predict takes the normalised float batch model.preprocess gives, not "
                f"uint8 images (shape {list(first.shape)}): model.predict(model.preprocess(x)); "
                "preprocess takes files, PIL images and uint8 tensors, one or a list."
            )
        shape = self.input_shape
        if shape and first.dim() == len(shape):
            raise ValueError(
                f"model.predict takes a batch (N, {', '.join(map(str, shape))}), not one sample "
                f"of shape {list(first.shape)}: add the batch axis (x[None]), or pass it through "
                "model.preprocess, which gives a batch."
            )
        if shape and len(shape) == 3 and first.dim() == 4 and first.shape[1] != shape[0]:
            raise ValueError(
                f"model.predict takes batches of {shape[0]} channels first (N, {shape[0]}, H, W), "
                f"not {list(first.shape)} (channels last? x.permute(0, 3, 1, 2)); "
                "model.preprocess gives that layout."
            )
        if first.is_floating_point() and first.dtype != torch.float32:
            raise TypeError(
                f"model.predict takes float32 batches, as model.preprocess gives, not "
                f"{first.dtype}: x.float()."
            )
        return self.model.labeller.decode(self.model(*inputs))


def _built(
    config: dict[str, Any],
    state: dict[str, Any],
    file: Path,
    allowed_targets: list[str],
    max_image_pixels: int | None,
) -> tuple[nn.Module, Any]:
    """The model and the transforms of checkpoint `file` (its `state` and saved `config`),
    each `_target_` admitted by `allowed_targets` first: every import of the project's code
    load_model makes."""
    built = {"model": config["model"], "transforms": config["transforms"]}
    try:
        admitted = check_targets(built, allowed_targets)
        # a key a target does not take, a value of the wrong type: as mode=eval's
        # validate_config says it, not Hydra's two-line TypeError from the build
        problems = [p for path, node, obj in admitted for p in key_problems(path, node, obj)]
        if problems:
            raise ConfigError("; ".join(dict.fromkeys(problems)))
    except ConfigError as err:
        raise CheckpointError(f"{file}: its saved config is refused: {err}") from None
    model = rebuild_model(config, state, file)
    image_sides(config["transforms"], max_image_pixels, file)
    return model, build(config["transforms"], "transforms", file)


def load_model(
    path: str | Path,
    allowed_targets: list[str] | None = None,
    project_root: str | Path | None = None,
    threshold: float | None = None,
    max_image_pixels: int | None = PILLOW_MAX_PIXELS,
    max_jpeg_scans: int | None = MAX_JPEG_SCANS,
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
    has none); `model.labeller.threshold = 0.3` changes it later. `max_image_pixels` and
    `max_jpeg_scans` (None: no limit) bound the files `model.preprocess` reads, as
    dataset.decode.max_image_pixels and dataset.decode.max_jpeg_scans bound a training's. Works from any working
    directory: the project (`project_root`; by default $PROJECT_ROOT, else the working
    directory or a folder above it holding conf/config.yaml, else the checkout this engine is
    imported from) is put on sys.path for the template's `src.*` targets. The code always
    comes from there, another project's checkpoint loaded in the same process from its own
    (engine.inference.project.project_code), never from a path the checkpoint holds (a saved paths.root_dir that
    names another folder is one warning). The checkpoint's `_target_`s must be in
    `allowed_targets` (default: the project's conf/config.yaml's); the file is read with
    weights_only=True and checked as hostile input (engine.inference.checkpoint.
    read_checkpoint: no command, no download, no URL, finite weights), so nothing in it
    runs."""
    read = read_checkpoint(path, "load_model", BUILT)
    file, state, config = read.file, read.state, read.config
    root = find_project(config, file, project_root)
    if allowed_targets is None:
        if root is None:
            raise missing_project(file)
        allowed_targets = shipped_entries(root / PROJECT_CONFIG)
    targets = _targets(config["model"], config["transforms"])
    own_code = project_code(root, targets) if root is not None else nullcontext()
    with own_code:
        model, pipelines = _built(config, state, file, allowed_targets, max_image_pixels)
    try:
        labeller = Labeller.from_config(config, threshold, "threshold")
    except ConfigError as err:
        raise CheckpointError(f"{file}: {err}") from None
    model.classes = labeller.classes
    model.multi_label = labeller.multi_label
    model.labeller = labeller
    shape = config["model"].get("input_shape") if isinstance(config["model"], dict) else None
    model.predict = Predict(model, list(shape) if isinstance(shape, list | tuple) else None)
    model.preprocess = Preprocess(pipelines, max_image_pixels, max_jpeg_scans)
    return model
