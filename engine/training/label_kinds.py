"""The loss and the metrics must read the labels the data has: class indices (single-label)
or multi-hot rows (dataset.multi_label). A mismatch is refused in one line naming the fix,
before the first batch, instead of failing deep in a step (or, worse, measuring nonsense)."""

from __future__ import annotations

import functools
from typing import Any

from engine.config.errors import ConfigError
from engine.data.datasets.base import DatasetHooks
from engine.training.metric import AnyMetric


def check_label_kinds(
    dataset: DatasetHooks, make_loss: Any, metrics: dict[str, AnyMetric], loss: str
) -> None:
    """Refuse a loss (`make_loss`: the loss group's partial, `loss`: its _target_) or metric
    made for the other kind of labels; a loss without `multi_label` is single-label."""
    kind = make_loss.func if isinstance(make_loss, functools.partial) else make_loss
    multi = bool(dataset.multi_label)
    data = (
        "multi-label (dataset.multi_label=true: multi-hot targets)"
        if multi
        else "single-label (one class per sample)"
    )
    if bool(getattr(kind, "multi_label", False)) != multi:
        fix = "use loss=bce" if multi else "use loss=cross_entropy, or set dataset.multi_label=true"
        raise ConfigError(
            f"loss._target_={loss} is made for {'single' if multi else 'multi'}-label targets, "
            f"but the data is {data}: {fix} (experiment=multilabel_csv sets loss, metrics and "
            "monitor for multi-label CSVs)."
        )
    wrong = [name for name, m in metrics.items() if bool(m.multi_label) != multi]
    if wrong:
        fix = "metrics=multilabel" if multi else "metrics=default"
        raise ConfigError(
            f"metrics.{wrong[0]} ({type(metrics[wrong[0]]).__name__}) measures "
            f"{'single' if multi else 'multi'}-label predictions, but the data is {data}: use "
            f"{fix} (and trainer.checkpoint.monitor={'val/map' if multi else 'val/acc'})."
        )
