"""TensorBoard output of a run: scalars, the first batch as images, config text, hparams."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch
from torch.utils.tensorboard import SummaryWriter
from torch.utils.tensorboard.summary import hparams


def hparams_of(config: dict[str, Any]) -> dict[str, Any]:
    """The run's choices for the HParams table: every config leaf except paths and `_partial_`."""
    flat = flatten({k: v for k, v in config.items() if k != "paths"})
    return {k: v for k, v in flat.items() if not k.endswith("_partial_")}


def flatten(tree: Any, prefix: str = "") -> dict[str, Any]:
    """Nested dicts/lists -> {"a.b": value}; lists become strings (HParams takes scalars)."""
    if isinstance(tree, dict):
        out: dict[str, Any] = {}
        for key, value in tree.items():
            out.update(flatten(value, f"{prefix}{key}."))
        return out
    value = tree if isinstance(tree, (bool, int, float, str)) else str(tree)
    return {prefix[:-1]: value}


class TensorBoardLogger:
    """A SummaryWriter with the few calls the training loop makes; with `enabled=False` (the
    other ranks of a distributed job) the calls do nothing and no event file is written."""

    def __init__(self, log_dir: str | Path, enabled: bool = True) -> None:
        self.log_dir = Path(log_dir)
        self.writer = SummaryWriter(log_dir=str(log_dir)) if enabled else None

    def scalars(self, values: dict[str, float], step: int) -> None:
        """One point per tag at `step`."""
        if self.writer is None:
            return
        for tag, value in values.items():
            self.writer.add_scalar(tag, value, step)

    def images(self, tag: str, batch: torch.Tensor) -> None:
        """A grid of images in [0, 1], shape (N, C, H, W), C in {1, 3}."""
        if self.writer is not None:
            self.writer.add_images(tag, batch.float().cpu(), 0)

    def text(self, tag: str, text: str) -> None:
        """Preformatted text (indented, so TensorBoard's markdown keeps it verbatim)."""
        if self.writer is not None:
            self.writer.add_text(tag, "\n".join("    " + line for line in text.splitlines()), 0)

    def hparams(self, params: dict[str, Any], metrics: dict[str, float]) -> None:
        """Record `params` and final `metrics` (as `hparams/<key>` scalars) for the HParams tab.

        Written into this run's own event file, so sweep jobs compare side by side.
        """
        if self.writer is None:
            return
        tagged = {f"hparams/{key}": float(value) for key, value in metrics.items()}
        exp, ssi, sei = hparams(params, tagged)
        for summary in (exp, ssi, sei):
            self.writer.file_writer.add_summary(summary)  # type: ignore[union-attr]
        self.scalars(tagged, 0)

    def close(self) -> None:
        """Flush and close the event file."""
        if self.writer is not None:
            self.writer.close()

    def __enter__(self) -> TensorBoardLogger:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
