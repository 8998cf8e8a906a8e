"""A classifier's head: the layer with one output per class, found the same way for a timm
model, a torchvision model and the template's own."""

from __future__ import annotations

from torch import nn


def head_module(model: nn.Module, num_classes: int) -> tuple[str, nn.Module] | None:
    """(name, module) of `model`'s head: timm's `get_classifier()` where the model has one,
    else the last Linear (or 1x1-kernel convolution, as SqueezeNet's) in registration order
    with `num_classes` outputs; None when there is none."""
    get = getattr(model, "get_classifier", None)
    classifier = get() if callable(get) else None
    found = None
    for name, module in model.named_modules():
        if module is classifier and name:
            return name, module
        if (isinstance(module, nn.Linear) and module.out_features == num_classes) or (
            isinstance(module, nn.Conv2d) and module.out_channels == num_classes
        ):
            found = name, module
    return found


def head_keys(model: nn.Module, num_classes: int) -> list[str]:
    """The state-dict keys of `model`'s head (`head_module`); [] when it has none."""
    found = head_module(model, num_classes)
    if found is None:
        return []
    name, module = found
    return [f"{name}.{key}" for key in module.state_dict()]
