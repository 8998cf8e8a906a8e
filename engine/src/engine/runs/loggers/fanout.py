"""The loggers of one run as one: each call goes to every configured logger, in config order."""

from __future__ import annotations

from contextlib import ExitStack
from pathlib import Path

import torch

from engine.runs.loggers.base import Logger


class Loggers:
    """Every logger of `loggers` (name -> logger, the `logger.<name>` nodes); none on the
    other ranks of a distributed job, where each call does nothing."""

    def __init__(self, loggers: dict[str, Logger]) -> None:
        self.loggers = loggers

    def scalars(self, values: dict[str, float], step: int) -> None:
        for logger in self.loggers.values():
            logger.scalars(values, step)

    def image(self, tag: str, image: torch.Tensor, step: int = 0) -> None:
        for logger in self.loggers.values():
            logger.image(tag, image, step)

    def text(self, tag: str, text: str, step: int) -> None:
        for logger in self.loggers.values():
            logger.text(tag, text, step)

    def flush(self) -> None:
        for logger in self.loggers.values():
            logger.flush()

    def resumed(self, previous: Path) -> None:
        for logger in self.loggers.values():
            logger.resumed(previous)

    def finish(self, metrics: dict[str, float], step: int) -> None:
        for logger in self.loggers.values():
            logger.finish(metrics, step)

    def close(self) -> None:
        """Close every logger, even when one fails (its error is raised after the rest)."""
        with ExitStack() as stack:
            for logger in self.loggers.values():
                stack.callback(logger.close)
