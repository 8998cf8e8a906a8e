"""Pretrained weights into a model: one reader for a file from elsewhere and one matcher for
every source (`model.pretrained_file`, torchvision's weights enums), as Hugging Face's
`from_pretrained(ignore_mismatched_sizes=True)` matches a checkpoint to a model with another
head.

A weights file is hostile input, read as a checkpoint is in mode=eval: `.safetensors` by
safetensors (no code can be in it), anything else by `load_checkpoint` (weights_only: pickled
code never runs; compressed or oversized zip members refused). What it holds is a state dict,
a training checkpoint of this template (`best.pt` of your own pretraining: the weights its
monitor picked), or a dict wrapping one (`state_dict`, `model`: timm's and Lightning's
checkpoints). The `module.` and `_orig_mod.` that DDP and torch.compile put in front of every
key are taken off.

Matching: every weight whose name and shape fit the model is loaded. One of the model's head
(the classifier with an output per class, `head_keys`) whose shape differs, because the source
had another number of classes, is initialised afresh; any other weight whose shape differs is
refused, key by key in one line, as is a source of which no weight fits.
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from safetensors import SafetensorError
from safetensors.torch import load_file
from torch import nn

from engine.core.text import first_few
from engine.runs.checkpoint_checks import bad_weight
from engine.runs.checkpoint_files import CheckpointError, load_checkpoint
from engine.runs.checkpoint_weights import picked_weights
from engine.training.head import head_keys

log = logging.getLogger(__name__)

PREFIXES = ("module.", "_orig_mod.")  # what DDP and torch.compile put before every key
WRAPPERS = ("state_dict", "model", "module")  # where checkpoints of other trainers keep theirs
SHOWN = 6  # names shown in a list before "... (N in all)"


class WeightsError(CheckpointError):
    """Pretrained weights that cannot be used: one line naming the key, the source and why."""


def _shape(tensor: torch.Tensor) -> str:
    return "x".join(map(str, tensor.shape)) or "scalar"


@dataclass(frozen=True)
class Loaded:
    """What a source gave a model: `loaded` (the model's keys taken from it), `new` (the
    model's keys initialised afresh: absent from the source, or a head of another class
    count) and `unused` (the source's keys the model has no place for)."""

    source: str
    loaded: list[str]
    new: list[str]
    unused: list[str]

    def line(self) -> str:
        """The one log line: what was loaded, what is new, from where."""
        total = len(self.loaded) + len(self.new)
        text = f"pretrained weights from {self.source}: {len(self.loaded)} of {total} loaded"
        text += f"; new: {first_few(self.new, SHOWN)}" if self.new else "; nothing new"
        if self.unused:
            unused = first_few(self.unused, SHOWN)
            text += f"; {len(self.unused)} of the source's unused ({unused})"
        return text


@dataclass(frozen=True)
class WeightsFile:
    """A weights file, read: its `tensors` (a state dict, its `_metadata` kept where the file
    had one: module versions some models read), `source` (the file as the log names it) and
    `stats` (the mean and std of the inputs its weights saw, where the file records them: a
    checkpoint of this template; else None)."""

    tensors: dict[str, torch.Tensor]
    source: str
    stats: tuple[list[float], list[float]] | None = None


def _stripped(name: str) -> str:
    """`name` without DDP's and torch.compile's prefixes, in any order and number."""
    while name.startswith(PREFIXES):
        for prefix in PREFIXES:
            name = name.removeprefix(prefix)
    return name


def _renamed(weights: Any, rename: Callable[[str], str]) -> OrderedDict[str, torch.Tensor]:
    """`weights` with each key `rename`d, and so the module paths of its `_metadata` (the
    module versions some models read, BatchNorm's, MNASNet's, kept as torch keeps them)."""
    renamed = OrderedDict((rename(str(key)), tensor) for key, tensor in weights.items())
    metadata = getattr(weights, "_metadata", None)
    if isinstance(metadata, dict):  # keyed by module path: "" (the root), "layer1", ...
        renamed._metadata = {rename(f"{k}.").rstrip("."): v for k, v in metadata.items()}  # type: ignore[attr-defined]
    return renamed


def _saved_stats(state: dict[str, Any]) -> tuple[list[float], list[float]] | None:
    """The transforms' mean and std a template checkpoint's config records (None: none)."""
    transforms = (
        state.get("config", {}).get("transforms") if isinstance(state.get("config"), dict) else None
    )
    mean = transforms.get("mean") if isinstance(transforms, dict) else None
    std = transforms.get("std") if isinstance(transforms, dict) else None
    numbers = (list, tuple)
    if (
        isinstance(mean, numbers)
        and isinstance(std, numbers)
        and all(isinstance(v, float | int) for v in [*mean, *std])
    ):
        return [float(v) for v in mean], [float(v) for v in std]
    return None


def _tensors(found: Any, where: str) -> tuple[OrderedDict[str, torch.Tensor], str]:
    """The state dict inside `found` (a template checkpoint's picked weights, or the first of
    WRAPPERS that holds one), its keys without DDP's and torch.compile's prefixes; and which
    weights of a template checkpoint they are ("" for any other file)."""
    which = ""
    if isinstance(found, dict) and "config" in found and isinstance(found.get("model"), dict):
        found, picked = picked_weights(found)
        which = f" (a training checkpoint of this template: its {picked} weights)"
    while isinstance(found, dict) and not any(isinstance(v, torch.Tensor) for v in found.values()):
        inner = next((found[k] for k in WRAPPERS if isinstance(found.get(k), dict)), None)
        if inner is None:
            break
        found = inner
    if not isinstance(found, dict) or not found:
        raise WeightsError(f"{where} holds no weights (a dict of tensors): it is no state dict.")
    others = [str(k) for k, v in found.items() if not isinstance(v, torch.Tensor)]
    if others:
        raise WeightsError(
            f"{where} mixes other values with its weights ({first_few(others, SHOWN)}): give a "
            "state dict of tensors (torch.save(model.state_dict(), path)) or a .safetensors file."
        )
    return _renamed(found, _stripped), which


def read_weights(path: str | Path, key: str, where: str | None = None) -> WeightsFile:
    """Weights file `path` (given as config `key`; `where`: how an error names it, `key=path`
    by default) read as hostile input; every failure is a WeightsError naming the key and the
    file."""
    path = Path(path).expanduser()
    where = where or f"{key}={path}"
    if not path.is_file():
        raise WeightsError(
            f"{where}: no such file; give a state dict (.pt, .pth, .safetensors) or a "
            "checkpoint of this template (a run's checkpoints/best.pt)."
        )
    if path.suffix == ".safetensors":
        try:
            found: Any = load_file(path, device="cpu")
        except (SafetensorError, OSError, ValueError) as err:
            raise WeightsError(f"{where} is no readable safetensors file ({err}).") from None
    else:
        try:
            found = load_checkpoint(path)
        except CheckpointError as err:
            raise WeightsError(f"{key}: {err}") from None  # it names the file
    stats = _saved_stats(found) if isinstance(found, dict) else None
    weights, which = _tensors(found, where)
    bad = bad_weight(weights)
    if bad is not None:
        raise WeightsError(f"{where}: {bad}; fine-tune from another file.")
    return WeightsFile(weights, f"{path}{which}", stats)


def _common_prefix(names: list[str], ours: dict[str, torch.Tensor]) -> str:
    """The first name part every one of `names` starts with where taking it off makes names of
    `ours` (a LightningModule's `model.`), else ""."""
    first = {name.partition(".")[0] for name in names}
    if len(first) != 1:
        return ""
    prefix = f"{first.pop()}."
    return prefix if any(n.removeprefix(prefix) in ours for n in names) else ""


def _kind(tensor: torch.Tensor) -> str:
    return "floating" if tensor.is_floating_point() else "integer"


def load_matching(
    model: nn.Module, weights: dict[str, torch.Tensor], source: str, key: str, num_classes: int
) -> Loaded:
    """Load into `model` the `weights` (from `source`, given as config `key`) that fit it;
    a head of another class count stays freshly initialised. Refused in one line naming each
    key: a weight of another shape or kind (integer for floating point) outside the head, or
    a source of which no weight outside the head fits."""
    ours = model.state_dict()
    if not any(k in ours for k in weights) and (prefix := _common_prefix(list(weights), ours)):
        weights = _renamed(weights, lambda name: name.removeprefix(prefix))
        source = f"{source} (every key's {prefix} taken off)"
    fits = OrderedDict(
        (k, v)
        for k, v in weights.items()
        if k in ours and v.shape == ours[k].shape and _kind(v) == _kind(ours[k])
    )
    fits._metadata = getattr(weights, "_metadata", None) or getattr(ours, "_metadata", None)  # type: ignore[attr-defined]
    head = set(head_keys(model, num_classes))
    wrong = [k for k in weights if k in ours and k not in fits and k not in head]
    if wrong:
        shapes = "; ".join(
            f"{k}: {_shape(weights[k])} {_kind(weights[k])} there, {_shape(ours[k])} "
            f"{_kind(ours[k])} here"
            for k in wrong
        )
        raise WeightsError(
            f"{key}: {len(wrong)} weight(s) of {source} do not fit this model: {shapes}. It was "
            "trained for another architecture or input (channels): choose the model it was "
            "saved from (model.name) or another file."
        )
    parameters = {name for name, _ in model.named_parameters()}
    if not any(k in parameters and k not in head for k in fits):
        raise WeightsError(
            f"{key}: no weight of {source} outside the head fits this model (the source's: "
            f"{first_few(list(weights), SHOWN)}; the model's: {first_few(list(ours), SHOWN)}): it "
            "was saved from another architecture; choose the model it was saved from (model.name)."
        )
    model.load_state_dict(fits, strict=False)
    new = [k for k in ours if k not in fits]
    loaded = Loaded(source, list(fits), new, [k for k in weights if k not in ours])
    if len(loaded.loaded) < len(new):
        log.warning("%s: fewer than half the model's weights came from it", loaded.line())
    else:
        log.info("%s", loaded.line())
    return loaded
