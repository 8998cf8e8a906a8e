"""`make gpu-check`: how close the template's ImageFolder pipeline comes to feeding ResNet-50
(bf16 autocast, channels_last, batch 128) at its ceiling on CUDA, stage by stage, eager and
compiled, and TorchCodec's GPU JPEG decode against the CPU's; a dated block in BENCHMARKS.md.

    python -m bench.gpu_check [--no-write] [--tiny] [--out PATH] [--rounds N]

1. The ceiling: the template's TrainStep on batches already on the device (bench/gpu_model.py).
2. The loop's path (bench/gpu_rows.py): ImageFolderDataset (RandomResizedCrop 224 + flip,
   uint8), seeded samples, make_loader with the engine's defaults, the BatchMover, the
   side-stream lookahead and TrainStep, at loader.num_workers 4, 8, 12 and auto (resolved by the
   engine), the batched GPU decode, and torch.compile; each row as images/s, data wait and a
   fraction of the ceiling, and where its time goes by the engine's own stage timings.
3. JPEG decode of the same files (bench/gpu_decode.py): TorchCodec on one CPU thread and,
   batched, with device="cuda" (nvJPEG); the pixel gap of the two decode paths.
Without CUDA it runs the same code on tiny sizes (a smoke test: tests/test_gpu_check.py);
loader.pin_memory is then unset, as the template does, and nothing compiles.

No Hydra: it needs torch, torchvision, torchcodec, pillow, pillow-heif and numpy only (the
engine's image header imports pillow-heif). The device machines have their own torch and
torchvision and no torchcodec or pillow-heif: download the cp312 manylinux wheels here (`pip
download --no-deps --only-binary=:all: --python-version 3.12 --platform manylinux_2_28_x86_64
-d .whl torchcodec==0.17.0 pillow==13.0.0 pillow-heif==1.9.0`; PyPI's torchcodec is the
+cu130 build, which loaded on torch 2.11), carry `.whl`, then there `pip install --no-index
--no-deps --target /tmp/site .whl/*.whl` and run with PYTHONPATH=/tmp/site:.:engine/src.
"""

from __future__ import annotations

import argparse
import os
import platform
import tempfile
import time
from dataclasses import replace
from datetime import date
from pathlib import Path

import torch
import torchcodec
import torchvision

from bench.blocks import GPU, write_block
from bench.gpu_decode import agreement, decoding
from bench.gpu_model import compile_reason
from bench.gpu_rows import Fed, Row, Sizes, feeding, say
from bench.images import write_image_folder
from engine.metric_keys import MAIN_STAGES, WORKER_STAGES

DATA = Path("data/bench")
TINY = Sizes(16, (48, 36), 32, 4, (1, 2), 2, 1, 2, 1, 8, blocks=(1, 1, 1, 1))
# 2,048 photo-sized JPEGs (a window is about two epochs). Estimated on an H100 with 16 cores:
# ~4-4.5 min (JPEGs ~40 s, auto ~45 s, compile ~1-1.5 min, 3 rounds ~65 s; each round ~22 s)
FULL = Sizes(2048, (500, 375), 224, 128, (4, 8, 12), 12, 4, 24, 3, 256)
DALI = (
    "NVIDIA DALI: no row. NVIDIA DALI's wheel for CUDA 13 (nvidia-dali-cuda130 2.4.0) is "
    "199 MB, over the 64 MiB a device call can carry, and the device cannot reach a package "
    "index."
)


def _spread(values: Row, percent: bool = False) -> str:
    spread = values.wait if percent else values.rate
    scale, digits = (100, 1) if percent else (1, 0)
    low, mid, high = (scale * v for v in (spread.low, spread.median, spread.high))
    return f"{mid:.{digits}f} [{low:.{digits}f}-{high:.{digits}f}]"


def _compiled(fed: Fed, sizes: Sizes, reason: str | None) -> str:
    """The torch.compile line: step times eager and compiled, and what the compile cost."""
    eager, compiled = (
        next((r for r in fed.rows if r.setting.decode is None and r.setting.compiled is c), None)
        for c in (False, True)
    )
    if reason is not None or fed.first_s is None or eager is None or compiled is None:
        return f"torch.compile rows: {reason or 'absent: a failure, named in the table above'}."
    eager_ms, compiled_ms = (1000 * sizes.batch / r.rate.median for r in (eager, compiled))
    compile_s = fed.first_s - sizes.warmup * compiled_ms / 1000
    return (
        "torch.compile (engine/src/engine/training/compiled.py's compile_model, "
        f"trainer.compile=default, on {compiled.setting.threads} torch threads and as many "
        "inductor compile workers, as in a run with the compiled fed row's workers): a "
        f"ceiling step takes {eager_ms:.1f} ms eager and {compiled_ms:.1f} ms compiled "
        f"(medians); compiling cost {compile_s:.0f} s (the first {sizes.warmup} compiled "
        f"steps took {fed.first_s:.1f} s wall, less as many steady ones)."
    )


def _stage_table(fed: Fed) -> list[str]:
    """Per fed row, the median of each stage over the rounds (the engine's units)."""
    main = [f"{stage}, ms/batch" for stage in MAIN_STAGES]
    workers = [f"{stage}, ms/image" for stage in WORKER_STAGES]
    lines = [
        f"| setting | {' | '.join(main + workers)} |",
        "|---|" + "---|" * (len(main) + len(workers)),
    ]
    for row in fed.rows:
        if row.stages:
            cells = [row.stages.get(f"pipeline/{s}_ms") for s in (*MAIN_STAGES, *WORKER_STAGES)]
            digits = [1] * len(MAIN_STAGES) + [3] * len(WORKER_STAGES)
            text = ["-" if v is None else f"{v:.{d}f}" for v, d in zip(cells, digits, strict=True)]
            lines.append(f"| {row.setting.name} | {' | '.join(text)} |")
    return lines


def text(
    sizes: Sizes,
    tiny: bool,
    device: torch.device,
    fed: Fed,
    decoded: list[tuple[str, str]],
    reason: str | None,
    wall_s: float,
) -> str:
    """The block: the machine, what was measured, the throughput, stage and decode tables."""
    cuda = device.type == "cuda"
    gpu = torch.cuda.get_device_name(device) if cuda else "no CUDA device"
    precision = "bf16 autocast" if cuda else "fp32"
    model = "ResNet-50" if sizes.blocks == (3, 4, 6, 3) else f"a bottleneck ResNet {sizes.blocks}"
    other = "cuda" if cuda else "main"
    lines = [
        f"## GPU check: `make gpu-check` ({date.today().isoformat()})",
        "",
        f"`python -m bench.gpu_check{' --tiny' if tiny else ''}` on {gpu}, {os.cpu_count()} "
        f"CPU cores, {wall_s:.0f} s wall in all; Python {platform.python_version()}, torch "
        f"{torch.__version__}, torchvision {torchvision.__version__}, torchcodec "
        f"{torchcodec.__version__}. {sizes.images} JPEGs of {sizes.size[0]}x{sizes.size[1]}; "
        f"the template's ImageFolder pipeline (RandomResizedCrop {sizes.crop} + flip, uint8, "
        f"batch {sizes.batch}; make_loader with the engine's defaults: persistent workers, "
        "prefetch_factor 2; trainer.device_prefetch=True, loader.pin_memory=True"
        f"{'' if cuda else ' (unset: no CUDA)'}, trainer.pipeline_timing on; the main process "
        f"on the cores the workers leave) feeding {model} ({precision}, channels_last, SGD) "
        f"through the template's TrainStep: {sizes.batches} timed batches after "
        f"{sizes.warmup} (a window opens once their GPU work is done), median [min-max] of "
        f"{sizes.repeats} rotated rounds. The ceiling "
        "cycles two random uint8 batches already on the device, normalised as the loop does "
        "(the fed batches' shape, dtype and channels_last layout); `of ceiling` is a row's "
        "median images/s over the eager ceiling's. The "
        f"dataset.decode.device={other} row and the compiled fed row use {sizes.fixed} "
        "workers, a fixed count, so that they are timed in the same rotated rounds as the rest.",
        "",
        "| setting | images/s | data wait, % | of ceiling |",
        "|---|---|---|---|",
    ]
    ceiling = fed.rows[0].rate.median if fed.rows and fed.rows[0].setting.decode is None else 0
    for row in fed.rows:
        share = f"{row.rate.median / ceiling:.2f}" if ceiling else "-"
        lines.append(f"| {row.setting.name} | {_spread(row)} | {_spread(row, True)} | {share} |")
    lines += [f"| {name} | failed: {error} | - | - |" for name, error in fed.failed.items()]
    lines += [
        "",
        f"loader.num_workers=auto resolved to {fed.auto} (engine/src/engine/data/"
        f"resolve_loader.py, {fed.auto_s:.0f} s, before the rounds): {fed.auto_log}",
        "",
        _compiled(fed, sizes, reason),
        "",
        DALI,
        "",
        "Where a fed row's time goes, by the engine's own stage timings (trainer.pipeline_timing;"
        " medians over the rounds): in the main process ms per batch (wait: blocked on the "
        "loader; h2d: the copy and the normalisation; step: forward, backward and optimizer "
        "step, by CUDA events on CUDA), in the workers ms per image, summed over a batch's "
        f"images (collate: the batch's, per image). With dataset.decode.device={other} the "
        "workers read the files, check their headers (their `decode`) and draw the crops; the "
        "main process decodes and crops each batch, inside its wait.",
        "",
        *_stage_table(fed),
        "",
        "| JPEG decode, same files | images/s (pixels: levels apart) |",
        "|---|---|",
    ]
    lines += [f"| {name} | {value} |" for name, value in decoded]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> str:
    """Run the check; the block's text (also printed, written to --out, and to BENCHMARKS.md
    unless --no-write)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--no-write", action="store_true", help="leave BENCHMARKS.md alone")
    parser.add_argument("--tiny", action="store_true", help="tiny sizes (always without CUDA)")
    parser.add_argument("--out", type=Path, help="also write the block's text to this file")
    parser.add_argument("--rounds", type=int, help="rotated rounds (default: 3; tiny: 1)")
    args = parser.parse_args(argv)
    started = time.perf_counter()
    cuda = torch.cuda.is_available()
    tiny = args.tiny or not cuda
    sizes = TINY if tiny else FULL
    sizes = replace(sizes, repeats=args.rounds or sizes.repeats)
    device = torch.device("cuda" if cuda else "cpu")
    reason = compile_reason(device)
    with tempfile.TemporaryDirectory(prefix="gpu-check-") as tmp:
        folder = Path(tmp) if tiny else DATA  # the full set is kept for the next run
        name = f"gpu{sizes.size[0]}x{sizes.size[1]}"
        say(f"{sizes.images} JPEGs of {sizes.size[0]}x{sizes.size[1]} in {folder / name}")
        root = write_image_folder(folder / name, sizes.images, sizes.size, 2)
        fed = feeding(root, sizes, device, reason is None)
        say("JPEG decode and the val pixels' agreement")
        decoded = decoding(root, sizes)
        decoded.append(agreement(root, sizes, device))
    block = text(sizes, tiny, device, fed, decoded, reason, time.perf_counter() - started)
    print(block, flush=True)
    if args.out is not None:
        args.out.write_text(block + "\n")
    if not args.no_write:
        write_block(Path("BENCHMARKS.md"), block, GPU)
    return block


if __name__ == "__main__":
    main()
