"""Keys of the optimizer node that the engine reads itself to build the parameter groups
(engine/training/param_groups.py) and never passes to the optimizer class. Here, below both
the config checks and the training layer, so the checks know them without importing it."""

from __future__ import annotations

from typing import Annotated

from engine.core.bounds import Bound

LayerDecay = Annotated[float, Bound(0, 1, open_least=True)]


def group_settings(layer_decay: LayerDecay | None = None, no_decay_norm_bias: bool = True) -> None:
    """The parameter groups' keys with their types: what the config checks hold these keys to
    (`optimizer.layer_decay`: null or in (0, 1]; `optimizer.no_decay_norm_bias`: a bool)."""


GROUP_KEYS = ("layer_decay", "no_decay_norm_bias")
GROUP_TARGET = f"{__name__}.group_settings"  # named in the checks' messages
