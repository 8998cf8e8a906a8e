"""TensorBoard output of a run: scalars, labelled image grids, figures, config text, hparams.

Two x-axes, one per kind of series, never mixed within a tag:

- per optimizer step (`STEP_TAGS`: train/loss, the mean since the previous point, and
  train/lr): x = the optimizer step, counted over the whole training (a resumed run goes on
  from the checkpoint's step);
- per epoch (every other scalar: val/*, train/epoch_loss, train/acc, train/samples_per_s,
  ...): x = the epoch, 1 for the first.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch
from matplotlib.figure import Figure
from tensorboard.compat.proto.event_pb2 import Event
from torch.utils.tensorboard import SummaryWriter
from torch.utils.tensorboard.summary import hparams

STEP_TAGS = ("train/loss", "train/lr")  # x = optimizer step; every other scalar: x = epoch


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

    def image(self, tag: str, image: torch.Tensor, step: int = 0) -> None:
        """One image in [0, 1], shape (C, H, W), e.g. a labelled grid (engine/core/grid.py)."""
        if self.writer is not None:
            self.writer.add_image(tag, image.float().cpu(), step)

    def figure(self, tag: str, figure: Figure, step: int = 0) -> None:
        """A matplotlib figure as an image."""
        if self.writer is not None:
            self.writer.add_figure(tag, figure, step, close=False)

    def event(self, event: Event) -> None:
        """Write `event` as it is (its step and wall time kept): a resumed run's history."""
        if self.writer is not None:
            self.writer.file_writer.add_event(event)  # type: ignore[union-attr]

    def flush(self) -> None:
        """Put everything written so far into the event file."""
        if self.writer is not None:
            self.writer.flush()

    def text(self, tag: str, text: str) -> None:
        """Preformatted text (indented, so TensorBoard's markdown keeps it verbatim)."""
        if self.writer is not None:
            self.writer.add_text(tag, "\n".join("    " + line for line in text.splitlines()), 0)

    def hparams(self, params: dict[str, Any], tags: list[str]) -> None:
        """Record `params` for the HParams tab, with the scalar `tags` of this run as its
        metrics (the table shows each one's last point; nothing else is written for them).

        Written into this run's own event file, so sweep jobs compare side by side.
        """
        if self.writer is None:
            return
        exp, ssi, sei = hparams(params, dict.fromkeys(tags, 0.0))
        for summary in (exp, ssi, sei):
            self.writer.file_writer.add_summary(summary)  # type: ignore[union-attr]

    def close(self) -> None:
        """Flush and close the event file."""
        if self.writer is not None:
            self.writer.close()

    def __enter__(self) -> TensorBoardLogger:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
