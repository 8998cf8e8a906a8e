"""The logger contract: what a training tells every configured logger, and when.

A logger is a `Logger` subclass named by a `logger/<name>.yaml` `_target_`. It is built on
rank 0 only, once the run dir is claimed, as `Target(run=RunContext, **its YAML keys)`, and
then hears: `scalars` (train/loss and train/lr at logged optimizer steps, the per-epoch
metrics at the step that ended their epoch: one x-axis, the optimizer step), `image` (the
first batch's labelled grid), `text` (each epoch's table of pipeline stages), `flush` (before every checkpoint, so what the checkpoint covers
is on disk), `resumed` (the training went on from another run dir's checkpoint), `finish`
(the final metrics, one step past the last) and `close` (always, last). Only `scalars` must
be written; the others do nothing unless overridden.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import torch
from omegaconf import DictConfig


@dataclass(frozen=True)
class RunContext:
    """What a logger knows of its run when it is built."""

    out: Path  # the run dir
    # the first optimizer step this run logs: 0, or a resumed checkpoint's step + 1; a logger
    # that keeps earlier points (a file in this run dir) drops those at or past it
    start_step: int
    cfg: DictConfig  # the composed config (paths, mode)
    config: dict[str, Any]  # the resolved config, with the values taken from the data
    params: dict[str, Any]  # the run's HParams columns: the choices that tell runs apart


class Logger(ABC):
    """Base class of a logger (see the module docstring for when each method is called)."""

    # (module, how to install it): the package the logger imports, checked before any work
    requires: ClassVar[tuple[str, str] | None] = None

    @classmethod
    def start_problem(cls, key: str, node: DictConfig) -> str | None:
        """What stops this logger of config node `key` (`logger.<name>`) before any work, in
        one line naming the key and the fix (an unreachable server); None: nothing."""
        return None

    @abstractmethod
    def scalars(self, values: dict[str, float], step: int) -> None:
        """One point per key at optimizer step `step`."""

    def image(self, tag: str, image: torch.Tensor, step: int = 0) -> None:  # noqa: B027 (a hook: nothing unless overridden)
        """An image in [0, 1], shape (C, H, W); ignored by loggers without images."""

    def text(self, tag: str, text: str, step: int) -> None:  # noqa: B027 (a hook: nothing unless overridden)
        """A markdown text (a table) at optimizer step `step`; ignored by loggers without text."""

    def flush(self) -> None:  # noqa: B027 (a hook: nothing unless overridden)
        """Put what was logged so far on disk (a checkpoint is about to be written)."""

    def resumed(self, previous: Path) -> None:  # noqa: B027 (a hook: nothing unless overridden)
        """This training goes on from a checkpoint of the run dir `previous` (not this one):
        take over what was logged there before `RunContext.start_step`, where it can."""

    def finish(self, metrics: dict[str, float], step: int) -> None:  # noqa: B027 (a hook: nothing unless overridden)
        """The training ended with `metrics` (metrics.json's); `step` is one past its last."""

    def close(self) -> None:  # noqa: B027 (a hook: nothing unless overridden)
        """Release files and connections (also after a failure, without `finish`)."""
