"""The loss and the metrics must read the labels the data has: class indices (single-label)
or multi-hot rows (dataset.multi_label). A mismatch is refused in one line naming the fix,
before any work (from the config, and again from the built train split, which decides for a
dataset class of your own), instead of failing deep in a step or measuring nonsense."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

PRESET = "experiment=multilabel_csv sets the loss and metrics for a multi-label CSV"


def label_kind_problems(
    multi: bool, loss: Any, loss_target: str, metrics: Mapping[str, Any]
) -> list[str]:
    """What is wrong with a loss (`loss`: its class or function, named `loss_target`) and
    `metrics` (name -> class or instance) for `multi`-label data; a loss or metric without a
    `multi_label` attribute is single-label."""
    data = (
        "multi-label (dataset.multi_label=true: multi-hot targets)"
        if multi
        else "single-label (one class per sample)"
    )
    other = "single" if multi else "multi"
    if bool(getattr(loss, "multi_label", False)) != multi:
        fix = "use loss=bce" if multi else "use loss=cross_entropy, or set dataset.multi_label=true"
        return [
            f"loss._target_={loss_target} is made for {other}-label targets, but the data is "
            f"{data}: {fix} ({PRESET})."
        ]
    wrong = [name for name, m in metrics.items() if bool(getattr(m, "multi_label", False)) != multi]
    if wrong:
        fix = "metrics=multilabel" if multi else "metrics=default"
        kind = metrics[wrong[0]]
        name = kind.__name__ if isinstance(kind, type) else type(kind).__name__
        return [
            f"metrics.{wrong[0]} ({name}) measures {other}-label predictions, but the data is "
            f"{data}: use {fix} (the checkpoint monitor follows it unless "
            f"trainer.checkpoint.monitor is set; {PRESET})."
        ]
    return []
