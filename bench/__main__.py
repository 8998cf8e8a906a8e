"""`make bench`: the input pipelines side by side on this machine, as ratios measured in one run.

    python -m bench [--repeats 5] [--workers 2] [--batch-size 64] [--no-write] [--only NAME]

Writes seeded photo-like JPEGs once (data/bench/), builds the pre-resized caches with the
template's `mode=cache`, then measures, in interleaved rounds: the tutorial pipeline, the
template (normalised float and uint8 output, and from the cache), timm and DALI when installed
(`make bench-peers`), in-memory tensors, start-up costs, CPU normalisation into pooled or
fresh buffers (bench/normalize.py), ResNet-18 training, tar shards
streamed over HTTP next to local disk and webdataset (bench/shards.py); checks that
`train.py mode=benchmark` measures what the harness does; then how start-up and memory grow
with the dataset (bench/growth.py; alone: `--only growth`, `make bench-growth`), and what
dataset=mix and trainer.record_samples cost in the training loop (bench/sampling.py; alone:
`make bench-sampling`), and dataset=parquet beside tar shards and the folder (bench/parquet.py;
alone: `make bench-parquet`); prints the tables and puts them into BENCHMARKS.md with the command,
date, versions and machine.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from datetime import date
from pathlib import Path

from bench import (
    blocks,
    growth,
    image_rows,
    normalize,
    parquet,
    peers,
    report,
    sampling,
    shards,
    startup,
    tensors,
    training,
)
from bench.images import write_image_folder
from bench.template import template_config
from bench.timing import Candidate, Results, interleave
from engine.modes.cache import cache

DATA = Path("data/bench")
WARMUP = 3  # batches after the first, untimed
SMALL, LARGE = 1024, 768  # images per split at 500x375 and at 1000x750


def say(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def build_cache(root: Path, short_side: int, encoding: str = "raw") -> tuple[Path, dict]:
    """The template's `mode=cache` over `root`, built anew: (its dir, its metrics)."""
    out = DATA / f"cache_{root.name}_{short_side}_{encoding}"
    cfg = template_config(
        "mode=cache",
        "dataset=imagefolder",
        f"dataset.root={root}",
        f"cache.dir={out}",
        f"cache.short_side={short_side}",
        "cache.rebuild=true",
        "loader.num_workers=2",
        f"cache.encoding={encoding}",
    )
    return out, cache(cfg)


def image_section(
    title: str, rows: list[Candidate], args: argparse.Namespace, images: int
) -> tuple[str, Results]:
    say(f"{title} ...")
    timed = images // args.batch_size - 1 - WARMUP
    results = interleave(rows, args.repeats, WARMUP, timed, say)
    return report.pipeline_table(title, results, rows[0].name, "tutorial"), results


def peer_rows(root: Path, split: str, args: argparse.Namespace) -> list[Candidate]:
    found = peers.available()
    rows = []
    if found["timm"]:
        rows.append(peers.timm_row(root, split, args.batch_size, args.workers))
    if found["nvidia.dali"]:
        rows.append(peers.dali_row(root, split, args.batch_size, args.workers))
    return rows


def image_sections(
    small: Path, large: Path, caches: tuple[Path, Path], args: argparse.Namespace
) -> tuple[list[str], Results]:
    """Train and val on 500x375, val on 1000x750: tutorial, template, cache, peers; the
    tables and the results of the first (500x375 train)."""
    b, w = args.batch_size, args.workers
    rows = image_rows
    jobs = [
        (
            small,
            "train",
            "train (RandomResizedCrop 224 + flip)",
            SMALL,
            [
                rows.cache_row(caches[0], "train", b, w, "raw uint8"),
                rows.cache_row(caches[1], "train", b, w, "JPEG q90"),
                rows.loader_floor(SMALL, b, w),
            ],
        ),
        (small, "val", "val (Resize 256 + CenterCrop 224)", SMALL, []),
        (large, "val", "val (Resize 256 + CenterCrop 224)", LARGE, []),
    ]
    sections, results = [], []
    for root, split, task, count, extra in jobs:
        size = root.name.removeprefix("jpeg")
        title = f"{size} JPEG, {task}, {count} images, batch {b}, {w} workers"
        candidates = [
            rows.tutorial(root, split, b, w),
            *rows.template_rows(root, split, b, w),
            *extra,
            *peer_rows(root, split, args),
        ]
        text, measured = image_section(title, candidates, args, count)
        sections.append(text)
        results.append(measured)
    return sections, results[0]


def benchmark_mode(root: Path, compute: str, window: tuple[int, int]) -> float:
    """loader/samples_per_s from the real command line of `train.py mode=benchmark`, timing
    `window` = (warm-up, timed) batches."""
    warmup, batches = window
    with tempfile.TemporaryDirectory() as run:
        subprocess.run(
            [
                sys.executable,
                "train.py",
                "mode=benchmark",
                "dataset=imagefolder",
                f"dataset.root={root}",
                "transforms=imagenet",
                "loader.num_workers=2",
                "loader.batch_size=64",
                f"benchmark.compute={compute}",
                f"hydra.run.dir={run}",
                f"benchmark.warmup={warmup}",
                f"benchmark.batches={batches}",
            ],
            check=True,
            capture_output=True,
        )
        return json.loads((Path(run) / "metrics.json").read_text())["loader/samples_per_s"]


def benchmark_mode_section(root: Path, train_results: Results, timed: int) -> str:
    """`train.py mode=benchmark` (default window, and the harness's window inside one epoch)
    next to the harness's template rows of the 500x375 train table."""
    say("train.py mode=benchmark on the same data ...")
    windows = {
        "50 after 5 (the default; crosses 3 epoch ends)": (5, 50),
        f"{timed} after {1 + WARMUP} (the harness's window, inside one epoch)": (1 + WARMUP, timed),
    }
    rows: list[tuple[str, list[float]]] = []
    harness = {n: [s.rate for s in v] for n, v in train_results.samples.items()}
    for compute, output, row in (
        ("none", "uint8 batches", "template, uint8 (normalise on device)"),
        ("normalize", "model-ready float", "template, normalised float"),
    ):
        for label, window in windows.items():
            rates = [benchmark_mode(root, compute, window) for _ in range(2)]
            rows.append((f"benchmark.compute={compute} ({output}), batches {label}", rates))
        rows.append((f"harness: {row}, images/s", harness[row]))
    return report.value_table(
        f"`python train.py mode=benchmark dataset=imagefolder dataset.root={root} "
        "transforms=imagenet loader.num_workers=2 loader.batch_size=64` (loader/samples_per_s, "
        "images/s) next to the harness's rows of the first table",
        rows,
    )


def shard_section(small: Path, args: argparse.Namespace) -> str:
    say("tar shards: local disk, HTTP on loopback, webdataset ...")
    out = DATA / f"shards_{small.name}"
    return shards.section(small, out, args.repeats, args.batch_size, args.workers, say)


def growth_block(args: argparse.Namespace) -> None:
    """The growth section (its own block in BENCHMARKS.md, written by itself)."""
    start = time.perf_counter()
    say("start-up and memory as the dataset grows ...")
    sections = growth.growth_sections(args.repeats, say)
    wall = time.perf_counter() - start
    text = "\n\n".join(
        [
            f"## Start-up and memory as the dataset grows: `make bench-growth` "
            f"({date.today().isoformat()})",
            f"`make bench-growth` (= `python -m bench --only growth --repeats {args.repeats}`; "
            f"also part of `make bench`), {wall:.0f} s wall. Machine: {report.machine()}.",
            "Each cell: median [min-max] over the rounds, every one in a fresh process, the two "
            "pipelines alternating; ratios are medians of per-round ratios. " + growth.HOW,
            *sections,
        ]
    )
    print(text)
    if not args.no_write:
        blocks.write_block(Path("BENCHMARKS.md"), text, blocks.GROWTH)
        say(f"written into BENCHMARKS.md ({wall:.0f} s)")


def sampling_block(args: argparse.Namespace) -> None:
    """dataset=mix and trainer.record_samples against the plain loader (its own block)."""
    say("dataset=mix and trainer.record_samples in the training loop ...")
    text = sampling.section(max(3, args.repeats // 2), say)
    blocks.publish(text, sampling.BLOCK, write=not args.no_write)


def parquet_block(small: Path, args: argparse.Namespace) -> None:
    """dataset=parquet beside tar shards and the folder (its own block, `make bench-parquet`)."""
    say("Parquet beside tar shards and the image folder ...")
    out = DATA / f"parquet_{small.name}"
    text = parquet.section(small, out, args.repeats, args.batch_size, args.workers, say)
    blocks.publish(text, parquet.BLOCK, write=not args.no_write)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5, help="interleaved rounds (>= 5)")
    parser.add_argument("--workers", type=int, default=2, help="loader workers / DALI threads")
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--no-write", action="store_true", help="print only, leave BENCHMARKS.md")
    parser.add_argument(
        "--only",
        choices=["shards", "growth", "sampling", "parquet"],
        help="run this section alone",
    )
    args = parser.parse_args()
    if args.only == "growth":
        growth_block(args)
        return
    if args.only == "sampling":
        sampling_block(args)
        return
    start = time.perf_counter()
    say("writing the seeded JPEGs (once) ...")
    small = write_image_folder(DATA / "jpeg500x375", SMALL, (500, 375), seed=0)
    if args.only == "shards":
        print(shard_section(small, args), f"\n\n{time.perf_counter() - start:.0f} s wall.")
        return
    if args.only == "parquet":
        parquet_block(small, args)
        return
    large = write_image_folder(DATA / "jpeg1000x750", LARGE, (1000, 750), seed=1)
    raw256, raw_built = build_cache(small, 256)
    jpeg256, jpeg_built = build_cache(small, 256, "jpeg")
    cache80, _ = build_cache(small, training.CACHE_SIDE)
    sections, train_results = image_sections(small, large, (raw256, jpeg256), args)
    b, w = args.batch_size, args.workers
    say("in-memory tensors ...")
    rows = tensors.tensor_rows(tensors.write_tensors(DATA / "tensors.pt", 50_000, seed=0), 256)
    results = interleave(rows, args.repeats, 10, 150, say)
    sections.append(
        report.pipeline_table(
            "In-memory uint8 tensors (50,000 x 3x32x32), batch 256, uint8 batches",
            results,
            rows[0].name,
            "default DataLoader",
        )
        + f"\n\ntemplate / raw index_select ceiling: "
        f"{report.paired_ratio(results, rows[2].name, rows[3].name):.2f}x"
    )
    say("start-up with 1,000,000 metadata entries ...")
    sections.append(
        report.value_table(
            f"Start-up, 1,000,000 metadata entries, batch {startup.BATCH}, 2 workers",
            startup.startup_rows(args.repeats, say),
        )
    )
    say("CPU normalisation, pooled buffers and fresh ones ...")
    sections.append(
        report.value_table(
            "CPU normalisation of one batch (main process, one thread): the pooled output "
            "buffers of engine/src/engine/data/buffers.py against a fresh tensor per batch",
            normalize.normalize_rows(args.repeats),
        )
    )
    say("ResNet-18 training, 64 px ...")
    rows = training.training_rows(small, cache80, b, w)
    results = interleave(rows, args.repeats, 2, 8, say)
    sections.append(
        report.training_table(
            f"ResNet-18 training on 64 px crops, batch {b}, CPU (2 threads)", results, rows[0].name
        )
    )
    timed = SMALL // b - 1 - WARMUP  # the first table's timed batches
    sections.append(benchmark_mode_section(small, train_results, timed))
    sections.append(shard_section(small, args))
    wall = time.perf_counter() - start
    text = "\n\n".join(
        [
            f"## Input pipeline side by side: `make bench` ({date.today().isoformat()})",
            f"`make bench` (= `python -m bench --repeats {args.repeats} --workers {w} "
            f"--batch-size {b}`), {wall:.0f} s wall. Machine: {report.machine()}.",
            "Each cell: median [min-max] over interleaved rounds (order rotated per round); ratios "
            "are medians of per-round ratios. Every consumer reads one value per page of its "
            f"batch (the model's first touch). Pre-resized caches (short side 256, train + val): "
            f"raw {raw_built['cache/mb']:.0f} MB, built at {raw_built['cache/images_per_s']:.0f} "
            f"images/s; JPEG q90 {jpeg_built['cache/mb']:.0f} MB, "
            f"{jpeg_built['cache/images_per_s']:.0f} images/s.",
            *sections,
        ]
    )
    print(text)
    if not args.no_write:
        blocks.write_block(Path("BENCHMARKS.md"), text)
        say(f"written into BENCHMARKS.md ({wall:.0f} s)")
    growth_block(args)
    sampling_block(args)
    parquet_block(small, args)


if __name__ == "__main__":
    main()
