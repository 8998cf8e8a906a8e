"""`make gpu-check`: the template's ImageFolder pipeline feeding ResNet-50 (bf16 autocast,
channels_last) on CUDA, and TorchCodec's GPU JPEG decode against the CPU's; a dated block in
BENCHMARKS.md.

    python -m bench.gpu_check [--no-write] [--tiny]

1. Images/s and data wait of the training step with trainer.device_prefetch on/off x
   loader.pin_memory on/off: the template's ImageFolderDataset (RandomResizedCrop 224 + flip,
   uint8), seeded samples, its sampler and make_loader, the loop's BatchMover, side-stream
   lookahead and TrainStep, timed by engine/src/engine/measure/timing.py (rotated rounds, median [min-max]).
2. JPEG decode of the same files: TorchCodec's decode_jpeg on one CPU thread and, batched,
   with device="cuda" (nvJPEG), where available.
Without CUDA it runs the same code on tiny sizes (a smoke test: tests/test_gpu_check.py);
loader.pin_memory is then unset, as the template does.

No Hydra: it needs torch, torchvision, torchcodec, pillow, pillow-heif and numpy only. For a
Python without pillow, pillow-heif or numpy (the device machines have their own torch),
download wheels here, e.g. `pip download --only-binary=:all: --python-version 3.12 --platform
manylinux2014_x86_64 -d wheels pillow pillow-heif numpy`, carry `wheels/` over and run `pip
install --no-index --find-links wheels pillow pillow-heif numpy` there first (torchvision and
torchcodec must match that torch, so they are not carried).
"""

from __future__ import annotations

import argparse
import os
import platform
import tempfile
from datetime import date
from pathlib import Path

import torch
import torchcodec
import torchvision

from bench.blocks import GPU, write_block
from bench.gpu_rows import Sizes, agreement, decoding, feeding
from bench.images import write_image_folder

DATA = Path("data/bench")
TINY = Sizes(16, (48, 36), 32, 4, 1, 1, 1, 1, 8, blocks=(1, 1, 1, 1))


def full_sizes() -> Sizes:
    """On CUDA: 2,048 photo-sized JPEGs (a window is about two epochs), up to 12 workers."""
    workers = max(1, min(12, (os.cpu_count() or 2) - 2))
    return Sizes(2048, (500, 375), 224, 128, workers, 4, 24, 3, 256)


def text(sizes: Sizes, root: Path, device: torch.device) -> str:
    """The block: the machine, what was measured, the two tables."""
    fed, decoded = feeding(root, sizes, device), decoding(root, sizes)
    decoded.append(agreement(root, sizes, device))
    gpu = torch.cuda.get_device_name(device) if device.type == "cuda" else "no CUDA device"
    tiny = " --tiny" if sizes == TINY else ""
    precision = "bf16 autocast" if device.type == "cuda" else "fp32"
    model = "ResNet-50" if sizes.blocks == (3, 4, 6, 3) else f"a bottleneck ResNet {sizes.blocks}"
    lines = [
        f"## GPU check: `make gpu-check` ({date.today().isoformat()})",
        "",
        f"`python -m bench.gpu_check{tiny}` on {gpu}, {os.cpu_count()} CPU cores; Python "
        f"{platform.python_version()}, torch {torch.__version__}, torchvision "
        f"{torchvision.__version__}, torchcodec {torchcodec.__version__}. {sizes.images} JPEGs "
        f"of {sizes.size[0]}x{sizes.size[1]}; "
        f"the template's ImageFolder pipeline (RandomResizedCrop {sizes.crop} + flip, uint8, "
        f"{sizes.workers} workers, batch {sizes.batch}) feeding {model} ({precision}, "
        f"channels_last, SGD): {sizes.batches} timed batches after {sizes.warmup}, median "
        f"[min-max] of {sizes.repeats} rotated rounds.",
        "",
        "| setting | images/s | data wait, % |",
        "|---|---|---|",
    ]
    for name, rate, wait in fed:
        lines.append(
            f"| {name} | {rate.median:.0f} [{rate.low:.0f}-{rate.high:.0f}] | "
            f"{100 * wait.median:.1f} [{100 * wait.low:.1f}-{100 * wait.high:.1f}] |"
        )
    lines += ["", "| JPEG decode, same files | images/s (pixels: levels apart) |", "|---|---|"]
    lines += [f"| {name} | {value} |" for name, value in decoded]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> str:
    """Run the check; the block's text (also printed, and written unless --no-write)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--no-write", action="store_true", help="print only, leave BENCHMARKS.md")
    parser.add_argument("--tiny", action="store_true", help="tiny sizes (always without CUDA)")
    args = parser.parse_args(argv)
    cuda = torch.cuda.is_available()
    sizes = TINY if args.tiny or not cuda else full_sizes()
    device = torch.device("cuda" if cuda else "cpu")
    with tempfile.TemporaryDirectory(prefix="gpu-check-") as tmp:
        folder = Path(tmp) if sizes == TINY else DATA  # the full set is kept for the next run
        name = f"gpu{sizes.size[0]}x{sizes.size[1]}"
        block = text(sizes, write_image_folder(folder / name, sizes.images, sizes.size, 2), device)
    print(block)
    if not args.no_write:
        write_block(Path("BENCHMARKS.md"), block, GPU)
    return block


if __name__ == "__main__":
    main()
