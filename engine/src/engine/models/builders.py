"""`model=timm` and `model=torchvision`: any architecture of either library, pretrained by
config, with a head for the data's classes and its input channels (both always from the data).

- timm: `timm.create_model(name, pretrained, num_classes, in_chans, drop_rate,
  drop_path_rate)`, timm's own loading (its head replacement, its adaptation of the first
  layer to 1 or 4 channels), from the Hugging Face Hub or its cache.
- torchvision: the builder `name` with `num_classes`, then the weights enum member `weights`
  (`IMAGENET1K_V2`, `DEFAULT`) loaded by `engine.models.weights.load_matching`: a head of
  another class count is initialised afresh, as timm and Hugging Face do.
- `pretrained_file` (both): a state dict or a checkpoint of this template, read as hostile
  input and matched by the same `load_matching`.

Each logs one line: what was loaded, what is new, from where. A model that loaded weights
carries `pretrained_stats` (the mean and std its weights were trained on), which the run
checks its normalisation against (engine.training.models.warn_if_normalised_otherwise).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import timm
import torchvision
from timm.models import get_pretrained_cfg
from torch import nn

from engine.core.bounds import Fraction, Positive, Share
from engine.core.text import closest
from engine.models.hub import from_hub, from_url
from engine.models.weights import Loaded, WeightsError, load_matching, read_weights
from engine.training.head import head_keys
from engine.training.models import PRETRAINED_STATS

log = logging.getLogger(__name__)
AUXILIARY = ("googlenet", "inception_v3")  # torchvision classifiers with auxiliary heads


def check_name(library: str, name: str) -> None:
    """Refuse, in one line with the closest name, a `name` that `library` (timm, torchvision:
    its classification models) has no model of, or (timm) whose pretrained tag it does not
    know."""
    if library == "timm":
        if timm.is_model(name):
            arch, _, tag = name.partition(".")
            tags = [n.partition(".")[2] for n in timm.list_pretrained(f"{arch}.*")]
            if tag and tag not in tags:
                raise ValueError(
                    f"model.name={name!r}: timm has no weights tagged {tag!r} for {arch}; its "
                    f"tags: {', '.join(tags) or 'none'}."
                )
            return
        names, listing = timm.list_models(), "timm.list_models('*resnet*', pretrained=True)"
    else:
        names = torchvision.models.list_models(module=torchvision.models)
        if name in names:
            return
        listing = "torchvision.models.list_models(module=torchvision.models)"
    close = closest(name, names)
    hint = f" (did you mean {close}?)" if close else ""
    raise ValueError(
        f"model.name={name!r}: no {library} model of that name{hint}; {listing} lists them."
    )


# The keyword arguments model.kwargs may not give, by group, and the fix each one's line names:
# the builder sets them from the data or a key of its own, or they would load weights past
# the engine's reader (engine/models/weights.py).
RESERVED = {
    "timm": {
        "num_classes": "the data's classes set it",
        "in_chans": "the data's channels set it",
        "drop_rate": "use model.drop_rate",
        "drop_path_rate": "use model.drop_path_rate",
        "pretrained": "use model.pretrained",
        "pretrained_cfg": "name the weights by model.name's tag, e.g. resnet50.a1_in1k",
        "pretrained_cfg_overlay": "use model.pretrained or model.pretrained_file",
        "checkpoint_path": "use model.pretrained_file, which is read as input from elsewhere",
        "features_only": "the model is a classifier over the data's classes",
    },
    "torchvision": {
        "num_classes": "the data's classes set it",
        "weights": "use model.weights",
        "pretrained": "use model.weights",
        "aux_logits": "GoogLeNet's and Inception v3's auxiliary heads are off: no loss takes them",
    },
}


def _more(group: str, kwargs: dict[str, Any] | None, given: dict[str, Any]) -> dict[str, Any]:
    """`given` and the builder's further keyword arguments (`model.kwargs`); one of those that
    the data or another key sets (RESERVED) is refused, naming the fix."""
    taken = [key for key in RESERVED[group] if key in (kwargs or {})]
    if taken:
        fixes = "; ".join(f"{key}: {RESERVED[group][key]}" for key in taken)
        raise ValueError(
            f"model.kwargs sets {', '.join(taken)}, which model={group} does not take from "
            f"model.kwargs ({fixes}): take {'them' if len(taken) > 1 else 'it'} out."
        )
    return {**given, **(kwargs or {})}


T = TypeVar("T")


def _built(group: str, build: Callable[[], T], kwargs: dict[str, Any] | None) -> T:
    """`build()`; a TypeError naming one of `kwargs` (an argument the builder does not take)
    becomes one line naming model.kwargs."""
    try:
        return build()
    except TypeError as err:
        named = [key for key in kwargs or {} if f"'{key}'" in str(err)]
        if not named:
            raise
        raise ValueError(
            f"model.kwargs.{named[0]}: model={group}'s builder does not take it ({err}): "
            "take it out of model.kwargs, or check the model's own arguments."
        ) from None


def _one_source(group: str, **sources: Any) -> None:
    given = [f"model.{key}" for key, value in sources.items() if value not in (None, False)]
    if len(given) > 1:
        raise WeightsError(
            f"model={group}: {' and '.join(given)} both give the weights: keep one (the other "
            "null or false)."
        )


def _from_file(model: nn.Module, path: str, num_classes: int) -> Loaded:
    """`model` loaded from weights file `path`; where the file records the mean and std its
    weights saw (a checkpoint of this template), the model carries them."""
    read = read_weights(path, "model.pretrained_file")
    loaded = load_matching(model, read.tensors, read.source, "model.pretrained_file", num_classes)
    if read.stats is not None:
        setattr(model, PRETRAINED_STATS, (*read.stats, path))
    return loaded


def timm_model(
    name: str,
    num_classes: Positive,
    input_shape: Sequence[int],
    pretrained: bool = False,
    pretrained_file: str | None = None,
    drop_rate: Share = 0.0,
    drop_path_rate: Fraction | None = None,
    kwargs: dict[str, Any] | None = None,
) -> nn.Module:
    """timm's `name` for `num_classes` classes over inputs of `input_shape` (C, H, W):
    pretrained on the hub's weights (`pretrained`), on a file's, or randomly initialised;
    `kwargs`: more of `timm.create_model`'s keyword arguments (global_pool, img_size, ...)."""
    _one_source("timm", pretrained=pretrained, pretrained_file=pretrained_file)
    check_name("timm", name)
    given = {"num_classes": num_classes, "in_chans": input_shape[0], "drop_rate": drop_rate}
    if drop_path_rate is not None:
        given["drop_path_rate"] = drop_path_rate
    every = _more("timm", kwargs, given)
    if pretrained:
        model, source = _built("timm", lambda: _timm_pretrained(name, every), kwargs)
        cfg = model.pretrained_cfg
        new = head_keys(model, num_classes) if cfg.get("num_classes") != num_classes else []
        total = list(model.state_dict())
        loaded = Loaded(source, [k for k in total if k not in new], new, [])
        log.info("%s%s", loaded.line(), _adapted(cfg, input_shape[0]))
        setattr(model, PRETRAINED_STATS, (list(cfg["mean"]), list(cfg["std"]), source))
        return model
    model = _built("timm", lambda: timm.create_model(name, **every), kwargs)
    if pretrained_file is not None:
        _from_file(model, pretrained_file, num_classes)
    return model


def _timm_pretrained(name: str, kwargs: dict[str, Any]) -> tuple[nn.Module, str]:
    """timm's `name` with its pretrained weights, read by the engine from the hub's cache (or
    downloaded there first) and handed to timm, whose own loading replaces the head and adapts
    the first layer; a WeightsError within seconds where the hub cannot be reached."""
    key = "model.pretrained=true"
    cfg = get_pretrained_cfg(name)
    if cfg is None or not (cfg.hf_hub_id or cfg.url):
        raise WeightsError(
            f"{key}: timm has no pretrained weights for {name}: "
            f"timm.list_models('{name.partition('.')[0]}*', pretrained=True) lists those that do."
        )
    if cfg.hf_hub_id:
        what = f"timm's weights for {name} (hf-hub:{cfg.hf_hub_id})"
        weights, source = from_hub(cfg.hf_hub_id, key, what)
    else:
        weights, source = from_url(cfg.url, key, f"timm's weights for {name}")
    overlay = {"state_dict": weights}
    return timm.create_model(
        name, pretrained=True, pretrained_cfg_overlay=overlay, **kwargs
    ), source


def _adapted(cfg: dict[str, Any], channels: int) -> str:
    """What timm did to the first layer for `channels` inputs, for the log line."""
    theirs = cfg.get("input_size", (3,))[0]
    if channels == theirs:
        return ""
    return (
        f"; the first layer ({cfg.get('first_conv')}) adapted from {theirs} to {channels} channels"
    )


def torchvision_model(
    name: str,
    num_classes: Positive,
    input_shape: Sequence[int],
    weights: str | None = None,
    pretrained_file: str | None = None,
    kwargs: dict[str, Any] | None = None,
) -> nn.Module:
    """torchvision's classification builder `name` for `num_classes` classes, loaded with
    the weights enum member `weights` (by name: IMAGENET1K_V2, DEFAULT), a file's weights, or
    randomly initialised. Its models take 3-channel images."""
    _one_source("torchvision", weights=weights, pretrained_file=pretrained_file)
    check_name("torchvision", name)
    if input_shape[0] != 3:
        raise ValueError(
            f"model=torchvision: {name} takes 3-channel images, the data gives "
            f"{input_shape[0]} (input shape {tuple(input_shape)}): use transforms that give RGB "
            "(transforms=default, imagenet, model), or model=timm, which adapts its first layer."
        )
    # GoogLeNet's and Inception v3's auxiliary heads, trained by their recipe's extra losses,
    # make a training forward return a tuple no loss takes: built without them (their
    # pretrained weights are then left unused, and said so)
    extra = _more("torchvision", kwargs, {"num_classes": num_classes})
    if name in AUXILIARY:
        extra["aux_logits"] = False
    model = _built(
        "torchvision", lambda: torchvision.models.get_model(name, weights=None, **extra), kwargs
    )
    if weights is not None:
        member = weights_member(name, weights)
        what = f"torchvision's {name} weights {member}"
        key = f"model.weights={weights}"
        state, source = from_url(member.url, key, what)
        load_matching(model, state, source, key, num_classes)
        transforms = member.transforms()
        setattr(model, PRETRAINED_STATS, (list(transforms.mean), list(transforms.std), str(member)))
    elif pretrained_file is not None:
        _from_file(model, pretrained_file, num_classes)
    return model


def weights_member(name: str, weights: str) -> Any:
    """The member `weights` (IMAGENET1K_V2, DEFAULT; or written in full, as
    ResNet50_Weights.IMAGENET1K_V2) of `name`'s weights enum."""
    check_name("torchvision", name)
    enum = torchvision.models.get_model_weights(name)
    given, _, member = weights.rpartition(".")
    if given and given != enum.__name__:
        raise WeightsError(
            f"model.weights={weights!r} names {given}, but model.name={name} takes "
            f"{enum.__name__}: model.weights={member} (or {enum.__name__}.{member})."
        )
    if member not in enum.__members__:
        known = list(enum.__members__)
        raise WeightsError(
            f"model.weights={weights!r}: {enum.__name__} has {', '.join(known)} (DEFAULT: the "
            "best of them)."
        )
    return enum[member]
