"""SIGTERM / Ctrl-C (pre-emption): finish the current step, checkpoint, exit 128 + signal."""

from __future__ import annotations

import logging
import os
import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType

import torch

from engine.training.distributed import any_rank

log = logging.getLogger(__name__)

STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)


class StopRequest:
    """Set by SIGTERM or SIGINT while installed; a second signal stops at once."""

    def __init__(self) -> None:
        self.signum: int | None = None
        self._owner = os.getpid()

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        if os.getpid() != self._owner:  # a forked loader worker: the main process decides
            return
        if self.signum is not None:  # asked twice: do not wait for the step to end
            raise KeyboardInterrupt if signum == signal.SIGINT else SystemExit(128 + signum)
        self.signum = signum
        log.warning(
            "%s received: finishing this step, saving a checkpoint, then exiting "
            "(send it again to stop at once).",
            signal.Signals(signum).name,
        )

    @property
    def exit_code(self) -> int:
        """The conventional status of a process stopped by the signal (143 TERM, 130 INT)."""
        return 128 + (self.signum or 0)

    def exit_if_requested(self, device: torch.device) -> None:
        """Between epochs: exit 128 + signal when a stop signal reached any rank."""
        if any_rank([self.signum is not None], device)[0]:
            raise SystemExit(self.exit_code if self.signum else 128 + signal.SIGTERM)

    @contextmanager
    def installed(self) -> Iterator[StopRequest]:
        """Catch the stop signals for the duration (main thread only), then restore."""
        if threading.current_thread() is not threading.main_thread():
            yield self
            return
        previous = {s: signal.signal(s, self._handle) for s in STOP_SIGNALS}
        try:
            yield self
        finally:
            for s, handler in previous.items():
                signal.signal(s, handler)
