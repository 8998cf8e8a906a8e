"""The model side of `make gpu-check` (bench/gpu_check.py): the template's TrainStep on ResNet-50,
the batches of its ceiling (already on the device: no loader), and its torch.compile the way
`trainer.compile` does it (engine/src/engine/training/compiled.py)."""

from __future__ import annotations

import time

import torch
from torch import nn
from torchvision.models.resnet import Bottleneck, ResNet

from engine.training.batches import BatchMover, DeviceBatch
from engine.training.compiled import compile_model, compile_threads
from engine.training.device import resolve_precision
from src.step import TrainStep

MODE = "default"  # trainer.compile: torch.compile's own default, a bounded compile time
# Measured 2026-12-06 on the 2-core CPU machine: the tiny ResNet's first compiled step took 31 s
# with a cold inductor cache (3 s warm), half the smoke test's budget.
CPU_REASON = (
    "absent: no CUDA device; torch.compile of even the tiny ResNet took 31 s on 2 CPU cores "
    "(inductor's C++ kernels, cold cache), too slow for the smoke test"
)


def compile_reason(device: torch.device) -> str | None:
    """Why the compiled rows are left out on `device` (None: they are measured)."""
    return None if device.type == "cuda" else CPU_REASON


def train_step(device: torch.device, classes: int, blocks: tuple[int, ...]) -> TrainStep:
    """ResNet-50 (or, for the smoke test, its bottleneck design with fewer `blocks`) in
    channels_last, SGD at a constant rate, with bf16 autocast on CUDA (fp32 on a CPU: without
    bf16 units its autocast is ~20x slower)."""
    model = ResNet(Bottleneck, list(blocks), num_classes=classes)  # (3, 4, 6, 3): resnet50
    model = model.to(device, memory_format=torch.channels_last).train()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    constant = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: 1.0)
    return TrainStep(
        model,
        nn.CrossEntropyLoss(),
        optimizer,
        constant,
        resolve_precision("bf16-mixed" if device.type == "cuda" else "32", device),
    )


def ceiling_batches(
    mover: BatchMover, batch: int, crop: int, classes: int, count: int = 2
) -> list[DeviceBatch]:
    """`count` random uint8 batches moved and normalised by the loop's `mover`: on the device,
    in the shape, dtype and layout of the fed rows' batches (a compiled model sees the same
    inputs, so the fed rows reuse its graph instead of recompiling)."""
    seeded = torch.Generator().manual_seed(0)
    shape = (batch, 3, crop, crop)
    return [
        mover(
            (
                torch.randint(0, 256, shape, dtype=torch.uint8, generator=seeded),
                torch.randint(0, classes, (batch,), generator=seeded),
            )
        )
        for _ in range(count)
    ]


def compiled_warm_up(step: TrainStep, batch: DeviceBatch, steps: int, threads: int) -> float:
    """Compile `step`'s model in place as trainer.compile=default does, on `threads` torch
    threads and as many inductor compile workers (a run's: the cores its loader workers
    leave; torch.compile guards on the thread count, so the compiled rows keep it), then take
    `steps` steps on `batch`: their wall seconds, the compile included."""
    torch.set_num_threads(threads)
    compile_threads(MODE, threads)
    compile_model(step.model, MODE)
    start = time.perf_counter()
    for _ in range(steps):
        step(batch)
    if batch.inputs.is_cuda:
        torch.cuda.synchronize(batch.inputs.device)
    return time.perf_counter() - start
