"""A training of the reference project cut short at an optimizer step of its choosing, in
process: killed (an exception, as kill -9 some steps after the last checkpoint leaves it) or
sent a signal (a pre-emption: SIGTERM, Ctrl-C). One patch of EmaStep.optimizer_step for every
engine test that interrupts a run."""

from __future__ import annotations

import signal
from collections.abc import Callable

import pytest

from reference.step import EmaStep


def after_step(monkeypatch: pytest.MonkeyPatch, step: int, then: Callable[[], None]) -> None:
    """`then()` right after optimizer step `step` (before its loss point and checkpoint)."""
    original = EmaStep.optimizer_step

    def stepping(self: EmaStep) -> None:
        original(self)
        if self.steps == step:
            then()

    monkeypatch.setattr(EmaStep, "optimizer_step", stepping)


def kill_at_step(monkeypatch: pytest.MonkeyPatch, step: int) -> None:
    """Die right after optimizer step `step`, like kill -9 some steps after the last checkpoint."""

    def die() -> None:
        raise RuntimeError("killed")

    after_step(monkeypatch, step, die)


def stop_at_step(monkeypatch: pytest.MonkeyPatch, step: int, signum: int) -> None:
    """`signum` to this process right after optimizer step `step` (a pre-emption)."""
    after_step(monkeypatch, step, lambda: signal.raise_signal(signum))
