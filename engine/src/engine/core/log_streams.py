"""Which console stream a log record goes to: errors to stderr, everything else to stdout (the
shell's convention, so `2>errors.txt` holds what went wrong), each record printed once.
engine/conf/hydra/job_logging/ranked.yaml names `BelowError` as the stdout handler's filter."""

from __future__ import annotations

import logging


class BelowError(logging.Filter):
    """Passes records below ERROR (the stderr handler, level ERROR, takes the others)."""

    def filter(self, record: logging.LogRecord) -> bool:
        return record.levelno < logging.ERROR


def file_handlers() -> list[logging.FileHandler]:
    """The root logger's file handlers: the run's log file (train.log), not the console."""
    return [h for h in logging.getLogger().handlers if isinstance(h, logging.FileHandler)]
