"""How a model's logits become class names and scores, for single- and multi-label models alike:
softmax and the top class, or sigmoid and every class above a threshold. mode=eval,
mode=predict and `load_model` share it, so a notebook labels as predictions.csv does."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import torch

from engine.config.errors import ConfigError
from engine.data.targets import LABEL_SEPARATOR
from engine.runs.outputs import DATA_KEY

SEPARATOR = LABEL_SEPARATOR  # between the labels, and the scores, of one sample in a CSV cell
DEFAULT_THRESHOLD = 0.5  # metrics.threshold of a checkpoint that has none


def checked_threshold(value: Any, key: str) -> float:
    """`value` (config key `key`) as a threshold: a number from 0 to 1."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value <= 1:
        raise ConfigError(
            f"{key}={value!r}: expected a number from 0 to 1 (a class is predicted when its "
            f"sigmoid score is above it), e.g. {key}=0.5."
        )
    return float(value)


@dataclass
class Labeller:
    """Labels and scores of logits (B x C, output i is `classes[i]`): single-label scores are
    the softmax and the label its top class; multi-label scores are each class's sigmoid and
    the labels every class whose score is above `threshold` (none, one or several; a score
    exactly at it is not, as torchmetrics' F1 and exact match count it in training)."""

    classes: list[str]
    multi_label: bool = False
    threshold: float = DEFAULT_THRESHOLD

    @classmethod
    def from_config(
        cls, config: Mapping[str, Any], threshold: float | None = None, key: str = ""
    ) -> Labeller:
        """The labeller of a checkpoint's (resolved) `config`: its `data.multi_label` (what
        the training's labels were; else its dataset.multi_label, absent: false) and
        `metrics.threshold` (absent: 0.5), unless `threshold` (config key `key`, multi-label
        only) replaces it."""
        classes = list(config[DATA_KEY]["classes"])
        said = (config.get("dataset") or {}).get("multi_label", False)  # before data recorded it
        multi_label = bool(config[DATA_KEY].get("multi_label", said))
        if threshold is not None and not multi_label:
            raise ConfigError(
                f"{key}={threshold}: the checkpoint is single-label (its dataset.multi_label is "
                f"not true) and labels each sample with its top class; leave {key} at null."
            )
        if threshold is not None:
            return cls(classes, True, checked_threshold(threshold, key))
        saved = (config.get("metrics") or {}).get("threshold", DEFAULT_THRESHOLD)
        return cls(classes, multi_label, checked_threshold(saved, "metrics.threshold"))

    def scores(self, logits: torch.Tensor) -> torch.Tensor:
        """Float32 scores in [0, 1], B x C: sigmoid (multi-label) or softmax (rows sum to 1)."""
        logits = logits.float()
        return logits.sigmoid() if self.multi_label else logits.softmax(1)

    def predicted(self, logits: torch.Tensor) -> torch.Tensor:
        """Bool B x C: the classes each sample is labelled with. The comparison is in float64,
        so a score read back from a CSV agrees with it."""
        scores = self.scores(logits)
        if self.multi_label:
            return scores.double() > self.threshold
        return torch.nn.functional.one_hot(scores.argmax(1), len(self.classes)).bool()

    def decode(self, logits: torch.Tensor) -> tuple[list[list[str]], torch.Tensor]:
        """(labels, scores): each sample's class names (single-label: its one top class;
        multi-label: those above the threshold, in class order, maybe none) and the
        B x C scores."""
        scores, predicted = self.scores(logits), self.predicted(logits)
        labels = [[self.classes[k] for k in row.nonzero().flatten().tolist()] for row in predicted]
        return labels, scores

    def joined(self, names: list[str]) -> str:
        """Class names as one CSV cell, `a|b` ('' for none)."""
        return SEPARATOR.join(names)

    def joined_scores(self, scores: torch.Tensor) -> str:
        """One sample's C scores as one CSV cell, `circle:0.98|cross:0.01|...` in class order;
        each score is the float's exact repr, so `float()` reads back the compared value."""
        return SEPARATOR.join(
            f"{name}:{score!r}" for name, score in zip(self.classes, scores.tolist(), strict=True)
        )

    def check_names(self, file: object) -> None:
        """Multi-label CSV cells join names with `|`: a class name holding one is ambiguous."""
        bad = [name for name in self.classes if SEPARATOR in name]
        if self.multi_label and bad:
            raise ValueError(
                f"{file}: class {bad[0]!r} holds {SEPARATOR!r}, which separates the labels and "
                "scores in per-sample CSV cells; rename the class and retrain."
            )
