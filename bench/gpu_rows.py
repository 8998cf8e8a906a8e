"""The measurements of `make gpu-check` (bench/gpu_check.py): the template's ImageFolder
pipeline feeding ResNet-50 under each prefetch x pinning setting, and JPEG decode on CPU and
CUDA; everything is timed by engine/src/engine/measure/timing.py."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import nn
from torchcodec.decoders import decode_jpeg
from torchvision.models.resnet import Bottleneck, ResNet
from torchvision.transforms import v2

from engine.data.datasets.imagefolder import ImageFolderDataset
from engine.data.loader_settings import LoaderSettings
from engine.data.loaders import endless, make_loader
from engine.data.samplers import RandomOrder
from engine.data.seeded import SeededSamples
from engine.data.transforms import Normalizer
from engine.measure.timing import BatchMeter, Spread, Window, time_window
from engine.training.batches import BatchMover
from engine.training.device import resolve_precision
from engine.training.prefetch import device_batches, side_stream_for
from src.step import TrainStep

MEAN, STD = [0.485, 0.456, 0.406], [0.229, 0.224, 0.225]


@dataclass(frozen=True)
class Sizes:
    images: int  # JPEGs in the ImageFolder
    size: tuple[int, int]  # their width, height
    crop: int  # RandomResizedCrop output side
    batch: int
    workers: int
    warmup: int  # untimed batches per window
    batches: int  # timed batches per window
    repeats: int  # rotated rounds over the four settings
    decode: int  # JPEGs decoded per decode window
    blocks: tuple[int, int, int, int] = (3, 4, 6, 3)  # bottleneck blocks per stage: ResNet-50


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


def _settings(sizes: Sizes, pin: bool, cuda: bool) -> LoaderSettings:
    settings = LoaderSettings(
        batch_size=sizes.batch,
        shuffle=True,
        num_workers=sizes.workers,
        collate_fn=None,
        pin_memory=pin,
        drop_last=True,
        prefetch_factor=2,
        persistent_workers=True,
        timeout=0,
        multiprocessing_context=None,
    )
    return settings.applicable(cuda)[0]  # pinning is unset without CUDA, as the template does


def _dataset(root: Path, sizes: Sizes, decode_device: str) -> SeededSamples:
    """The train split, RandomResizedCrop + flip, decoded by `decode_device`."""
    crop = v2.RandomResizedCrop(sizes.crop, antialias=True)
    pipeline = v2.Compose([crop, v2.RandomHorizontalFlip()])
    return SeededSamples(
        ImageFolderDataset(str(root), "train", pipeline, decode_device=decode_device), 0
    )


def feeding(root: Path, sizes: Sizes, device: torch.device) -> list[tuple[str, Spread, Spread]]:
    """(setting, images/s, data-wait fraction) for trainer.device_prefetch x loader.pin_memory
    with the workers decoding (dataset.decode_device=cpu), and the batched decode in the main
    process with both on: on the GPU (dataset.decode_device=cuda), or without CUDA the same
    path on the CPU (main); each timed once per round, in an order rotated per round."""
    decoders = ["cpu", "cuda" if device.type == "cuda" else "main"]
    datasets = {name: _dataset(root, sizes, name) for name in decoders}
    step = train_step(device, len(datasets["cpu"].classes), sizes.blocks)
    normalizer = Normalizer(MEAN, STD)

    def train(batch: Any) -> None:
        loss, _ = step.forward(batch)
        step.backward(loss)
        step.optimizer_step()

    def window(prefetch: bool, pin: bool, decode: str) -> Window:
        settings, dataset = _settings(sizes, pin, device.type == "cuda"), datasets[decode]
        loader = make_loader(dataset, settings, RandomOrder(dataset, 0), True)  # type: ignore[arg-type]
        mover, side = BatchMover(device, normalizer, True), side_stream_for(device, prefetch)
        return time_window(
            BatchMeter(),
            lambda: endless(loader),
            sizes.warmup,
            sizes.batches,
            lambda batches: device_batches(batches, mover, side),
            train,
        )  # the loader and its persistent workers go when this returns

    grid = [(prefetch, pin, "cpu") for prefetch in (True, False) for pin in (True, False)]
    grid += [(True, True, name) for name in decoders[1:]]
    windows: dict[tuple[bool, bool, str], list[Window]] = {setting: [] for setting in grid}
    for round_ in range(sizes.repeats):
        shift = round_ % len(grid)
        for setting in grid[shift:] + grid[:shift]:
            windows[setting].append(window(*setting))
    rows = []
    for (prefetch, pin, decode), measured in windows.items():
        pinning = "True (unset: no CUDA)" if pin and device.type != "cuda" else str(pin)
        rows.append(
            (
                f"dataset.decode_device={decode}, trainer.device_prefetch={prefetch}, "
                f"loader.pin_memory={pinning}",
                Spread.of(w.samples_per_s for w in measured),
                Spread.of(w.data_wait_frac for w in measured),
            )
        )
    return rows


def agreement(root: Path, sizes: Sizes, device: torch.device) -> tuple[str, str]:
    """(what, how far apart): the val pipeline (Resize, CenterCrop) on the same files, decoded
    by the workers on the CPU and by the batched path on `device` (cuda; main without CUDA)."""
    side = round(sizes.crop * 256 / 224)
    pipeline = v2.Compose([v2.Resize(side, antialias=True), v2.CenterCrop(sizes.crop)])
    batches = {}
    for decode in ("cpu", "cuda" if device.type == "cuda" else "main"):
        data = ImageFolderDataset(
            str(root), "val", pipeline, decode_device=decode, reduced_decode=False
        )
        loader = make_loader(data, _settings(sizes, False, False), None, False, "val")
        batches[decode] = torch.cat([inputs.cpu() for inputs, _ in loader])
    cpu, other = batches.values()
    gap = (cpu.int() - other.int()).abs()
    name = f"val pixels: dataset.decode_device={list(batches)[1]} against cpu"
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
