"""train.py under torchrun with an injected fault, chosen by environment variables:
STOP_AT_STEP=N makes every rank SIGTERM itself after optimizer step N (a pre-emption);
KILL_AT_STEP=N makes every rank SIGKILL itself after optimizer step N (kill -9: no save);
NAN_RANK=R makes rank R's second train loss NaN."""

from __future__ import annotations

import os
import runpy
import signal
import sys
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from src.step import TrainStep  # noqa: E402

stop_at = int(os.environ.get("STOP_AT_STEP", "0"))
kill_at = int(os.environ.get("KILL_AT_STEP", "0"))
nan_rank = os.environ.get("NAN_RANK")
optimizer_step, cross_entropy = TrainStep.optimizer_step, torch.nn.functional.cross_entropy
losses = []


def stepping(self: TrainStep) -> None:
    optimizer_step(self)
    if self.steps == stop_at:
        signal.raise_signal(signal.SIGTERM)
    if self.steps == kill_at:
        os.kill(os.getpid(), signal.SIGKILL)


def diverging(*args, **kwargs):  # type: ignore[no-untyped-def]
    loss = cross_entropy(*args, **kwargs)
    if torch.is_grad_enabled() and os.environ.get("RANK") == nan_rank:
        losses.append(loss)
        if len(losses) == 2:
            return loss * float("nan")
    return loss


TrainStep.optimizer_step = stepping  # type: ignore[method-assign]
torch.nn.functional.cross_entropy = diverging
sys.argv = [str(ROOT / "train.py"), *sys.argv[1:]]
runpy.run_path(str(ROOT / "train.py"), run_name="__main__")
