"""The JPEG rows of `make gpu-check` (bench/gpu_check.py): TorchCodec's decode on one CPU thread
against its batched nvJPEG decode on CUDA, and how far apart the pixels of the two decode paths
lie after the val pipeline; timed by engine/src/engine/measure/timing.py."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import torch
from torchcodec.decoders import decode_jpeg
from torchvision.transforms import v2

from bench.gpu_rows import Sizes, loader_settings
from engine.data.datasets.imagefolder import ImageFolderDataset
from engine.data.decode_policy import DecodePolicy
from engine.data.loaders import make_loader
from engine.measure.timing import BatchMeter, time_window


def agreement(root: Path, sizes: Sizes, device: torch.device) -> tuple[str, str]:
    """(what, how far apart): the val pipeline (Resize, CenterCrop) on the same files, decoded
    by the workers on the CPU and by the batched path on `device` (cuda; main without CUDA)."""
    side = round(sizes.crop * 256 / 224)
    pipeline = v2.Compose([v2.Resize(side, antialias=True), v2.CenterCrop(sizes.crop)])
    batches = {}
    for decode in ("cpu", "cuda" if device.type == "cuda" else "main"):
        data = ImageFolderDataset(
            str(root), "val", pipeline, decode=DecodePolicy(reduced=False, device=decode)
        )
        settings, _ = loader_settings(sizes, sizes.fixed, False).applicable(False)
        loader = make_loader(data, settings, None, False, "val")
        batches[decode] = torch.cat([inputs.cpu() for inputs, _ in loader])
    cpu, other = batches.values()
    gap = (cpu.int() - other.int()).abs()
    name = f"val pixels: dataset.decode.device={list(batches)[1]} against cpu"
    return name, (
        f"mean {gap.float().mean():.2f}, max {int(gap.max())}, "
        f"{100 * (gap > 2).float().mean():.1f}% over 2 levels"
    )


def decoding(root: Path, sizes: Sizes) -> list[tuple[str, str]]:
    """(decoder, images/s or why not) for the same JPEG bytes: TorchCodec's decode_jpeg on one
    CPU thread, image by image, and batched on CUDA (nvJPEG)."""
    data = [f.read_bytes() for f in sorted(root.rglob("*.jpg"))[: sizes.decode]]
    batch = min(sizes.batch, len(data))

    def decoded(device: str) -> Iterator[list[torch.Tensor]]:
        while True:
            for i in range(0, len(data) - batch + 1, batch):
                chunk = data[i : i + batch]
                if device == "cuda":
                    yield decode_jpeg(chunk, device="cuda")
                else:
                    yield [decode_jpeg(one) for one in chunk]

    def rate(device: str) -> str:
        timed = max(1, len(data) // batch)
        window = time_window(BatchMeter(size=len), lambda: decoded(device), 1, timed)
        return f"{window.samples_per_s:.0f}"

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        rows = [("torchcodec decode_jpeg, CPU, 1 thread, image by image", rate("cpu"))]
    finally:
        torch.set_num_threads(threads)
    gpu = f'torchcodec decode_jpeg(device="cuda"), batches of {batch}'
    if not torch.cuda.is_available():
        return [*rows, (gpu, "not available: no CUDA device")]
    try:
        return [*rows, (gpu, rate("cuda"))]
    except RuntimeError as err:  # e.g. a TorchCodec built without nvJPEG
        return [*rows, (gpu, f"not available: {str(err).splitlines()[0]}")]
