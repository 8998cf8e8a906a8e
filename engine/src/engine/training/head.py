"""A classifier's head: the layers with one output per class, found the same way for a timm
model, a torchvision model and the template's own."""

from __future__ import annotations

from torch import nn


def _outputs(module: nn.Module) -> int | None:
    """The outputs of a Linear or convolution (None for any other module)."""
    if isinstance(module, nn.Linear):
        return module.out_features
    if isinstance(module, nn.Conv2d):  # SqueezeNet's classifier is a 1x1 convolution
        return module.out_channels
    return None


def head_modules(model: nn.Module, num_classes: int) -> list[tuple[str, nn.Module]]:
    """(name, module) of each of `model`'s heads: what timm's `get_classifier()` names where
    the model has one (a distilled ViT has two), else every Linear or convolution with
    `num_classes` outputs (a torchvision model's classifier, and its auxiliary ones where it
    has them)."""
    get = getattr(model, "get_classifier", None)
    named = get() if callable(get) else None
    if named is not None:
        wanted = {id(m) for m in (named if isinstance(named, tuple) else (named,))}
        found = [(n, m) for n, m in model.named_modules() if id(m) in wanted and n]
        if found:
            return found
    return [(n, m) for n, m in model.named_modules() if n and _outputs(m) == num_classes]


def head_keys(model: nn.Module, num_classes: int) -> list[str]:
    """The state-dict keys of `model`'s heads (`head_modules`); [] when it has none."""
    return [
        f"{name}.{key}"
        for name, module in head_modules(model, num_classes)
        for key in module.state_dict()
    ]
