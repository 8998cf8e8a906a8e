"""Is compute slower than this machine can do it? The data-wait hint's sibling: on a CPU whose
cores are oversubscribed (a second job, or torch threads plus loader workers above the cores)
data wait stays low while every step takes several times its single-thread time."""

from __future__ import annotations

import logging
import math
import time

import torch
from torch import nn
from torch.func import functional_call

from engine.core.cpus import cores_per_rank
from engine.training.batches import DeviceBatch, one_thread
from engine.training.device import Precision
from engine.training.starvation import EpochHint

log = logging.getLogger(__name__)

SLOWER = 2.0  # compute per sample this many times a single-thread step's is "far slower"
REPEATS = 3  # single-thread steps timed; the fastest counts (the first warms caches)
MIN_BATCHES = 10  # a pass this short is mostly its first, slow steps: not judged


def single_thread_step_s(
    model: nn.Module, criterion: nn.Module, batch: DeviceBatch, precision: Precision
) -> float:
    """Seconds of one forward and backward pass over `batch` on one thread, leaving the model
    as it was: weights and buffers are copies (BatchNorm's running stats stay) and gradients
    are returned rather than accumulated."""
    module = getattr(model, "module", model)  # DDP's wrapper would synchronise ranks
    params = {k: v.detach().clone().requires_grad_() for k, v in module.named_parameters()}
    buffers = {k: v.clone() for k, v in module.named_buffers()}
    inputs, labels, extras = batch
    best = math.inf
    with one_thread():
        for _ in range(REPEATS):
            start = time.perf_counter()
            with precision.autocast():
                loss = criterion(
                    functional_call(module, (params, buffers), (inputs, *extras)), labels
                )
            torch.autograd.grad(loss, list(params.values()), allow_unused=True)
            best = min(best, time.perf_counter() - start)
    return best


def slow_compute_hint(
    per_sample_s: float, single_s: float, threads: int, workers: int
) -> str | None:
    """What to do when compute per sample is `SLOWER` times a single-thread step's or worse."""
    if per_sample_s < SLOWER * single_s:
        return None
    cores = cores_per_rank()
    return (
        f"compute took {1000 * per_sample_s:.2f} ms per sample, {per_sample_s / single_s:.1f}x "
        f"a single-thread step measured just now ({1000 * single_s:.2f} ms): the CPU cores are "
        f"oversubscribed ({threads} torch threads + {workers} loader workers on {cores} usable "
        "cores, or another job on this machine). Next steps: 1) trainer.num_threads=null (auto) "
        "or 1; 2) fewer loader.num_workers; 3) run one job per machine, or give each its cores "
        "(taskset, SLURM cpus_per_task)."
    )


class SlowComputeHint(EpochHint):
    """Logs `slow_compute_hint` once, on the CPU, at the first epoch after the first (whose
    first steps are slow anyway) of at least MIN_BATCHES batches: `keep` the first batch,
    `check` each epoch."""

    def __init__(self, device: torch.device, workers: int) -> None:
        self.done = device.type != "cpu"
        self.workers = workers
        self.batch: DeviceBatch | None = None

    def keep(self, batch: DeviceBatch) -> None:
        """The batch the single-thread step is timed on (the first of the run)."""
        if not self.done and self.batch is None:
            self.batch = batch

    def check(
        self,
        epoch: int,
        metrics: dict[str, float],
        model: nn.Module,
        criterion: nn.Module,
        precision: Precision,
    ) -> None:
        """Judge `epoch` by its train pass's compute per sample (epoch time less data wait)."""
        if not self.due(epoch) or self.batch is None:
            return
        samples = metrics["train/samples"]
        if samples < MIN_BATCHES * len(self.batch.labels):
            return
        self.done = True  # judged once a run
        compute_s = metrics["train/epoch_s"] * (1 - metrics["train/data_wait_frac"])
        was_training = model.training
        model.train()  # the step as training runs it (dropout, batch statistics)
        single = single_thread_step_s(model, criterion, self.batch, precision)
        model.train(was_training)
        hint = slow_compute_hint(
            compute_s / samples,
            single / len(self.batch.labels),
            torch.get_num_threads(),
            self.workers,
        )
        if hint is not None:
            log.warning("epoch %d: %s", epoch, hint)
