"""`trainer.compile`: torch.compile of the model for training, and its compile time on a line
of its own.

The bare model is compiled in place (`nn.Module.compile`), before the DDP wrapper: its state
dict keeps its own keys (no `_orig_mod.` in a checkpoint), and eval, predict and load_model,
which rebuild the model from its config, never compile. The compile itself happens on the
run's first batch, in `warm_up`: a forward and backward on that batch whose every effect is
undone (gradients, BatchNorm statistics, random streams), timed and logged alone, so neither
the first step's time nor train/samples_per_s carries it. Inductor compiles in a pool of
worker processes, started as fresh interpreters (not forked), one per thread the main process
has (the cores the loader workers leave), so it neither inherits the loader workers' state
nor takes their cores. A shape seen later (the last, smaller batch) recompiles in its step.
"""

from __future__ import annotations

import logging
import os
import time
from typing import Any

import torch
from torch import nn

from engine.core.seeding import restore_rng_states, rng_states
from engine.training.device import Precision

log = logging.getLogger(__name__)


def compile_model(model: nn.Module, mode: str | None) -> nn.Module:
    """`model`, compiled in place under torch.compile's `mode` ("default": its mode=None;
    None: not compiled)."""
    if mode is not None:
        model.compile(mode=None if mode == "default" else mode)
    return model


def compile_threads(mode: str | None, threads: int) -> None:
    """Inductor's compile workers: as many as the main process's torch threads, unless
    TORCHINDUCTOR_COMPILE_THREADS says otherwise."""
    if mode is not None and "TORCHINDUCTOR_COMPILE_THREADS" not in os.environ:
        from torch._inductor import config  # imported only where a run compiles

        config.compile_threads = threads


@torch.no_grad()
def _buffers(model: nn.Module) -> list[torch.Tensor]:
    return [buffer.clone() for buffer in model.buffers()]


def warm_up(
    model: nn.Module, inputs: torch.Tensor, extras: tuple[Any, ...], precision: Precision
) -> float:
    """Compile `model` (compiled by `compile_model`) for training on one batch: a forward and
    backward whose gradients, buffer updates and random draws are then undone; returns the
    seconds it took."""
    start = time.perf_counter()
    streams, buffers = rng_states(), _buffers(model)
    with precision.autocast():
        outputs = model(inputs, *extras)
    outputs.float().sum().backward()  # the backward graph: the same for any loss
    for parameter in model.parameters():
        parameter.grad = None
    with torch.no_grad():
        for buffer, saved in zip(model.buffers(), buffers, strict=True):
            buffer.copy_(saved)
    restore_rng_states(streams)
    if inputs.is_cuda:
        torch.cuda.synchronize(inputs.device)
    return time.perf_counter() - start
