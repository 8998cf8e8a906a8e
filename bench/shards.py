"""The streaming rows of `make bench` (issue 15): the template's tar-shard reader
(`dataset=iterable`) over HTTP on loopback next to the same shards on local disk, and next to
webdataset's own reader on them. The shards are the 500x375 JPEG folder written by the
template's `mode=shards` (128 samples each: 8 train shards, 4 per worker), served by
engine/src/engine/data/shards/serve.py in its own process. Every row: the train pipeline (RandomResizedCrop
224 + flip) on uint8 batches, a 256-sample shuffle buffer per worker, persistent workers; the
timed window spans several epochs, so shard reading and buffer refills are inside it.

    python -m bench --only shards   # this section alone (printed; BENCHMARKS.md untouched)
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from hydra.utils import instantiate
from torch.utils.data import DataLoader

from bench import report
from bench.image_rows import template_overrides
from bench.template import template_candidate, template_config
from bench.timing import Candidate, Results, interleave, paired_ratio, touch
from engine.data.decode import decode_image_bytes
from engine.data.loaders import endless
from engine.modes.shards import shards

BUFFER = 256  # shuffle buffer per worker, all rows
PER_SHARD = 128
WARMUP, TIMED = 4, 40  # batches; 16 per epoch of 1024 images at batch 64
LOCAL, HTTP = "template dataset=iterable, local disk", "template dataset=iterable, HTTP loopback"
WDS_SAME = "webdataset.WebDataset, the template's decode + transforms"
WDS_OWN = "webdataset.WebDataset, its own decode (PIL, torchrgb8) + the same transforms"


def write_shards(root: Path, out: Path) -> dict[str, float]:
    """The template's mode=shards over `root` (train and val), written anew into `out`."""
    where = (f"dataset.root={root}", f"shards.dir={out}", f"shards.max_samples={PER_SHARD}")
    options = ("shards.overwrite=true", "loader.num_workers=2")
    return shards(template_config("mode=shards", "dataset=imagefolder", *where, *options))


@contextmanager
def served(folder: Path) -> Iterator[str]:
    """`folder` served over HTTP on loopback by another process; its base URL."""
    command = [sys.executable, "-m", "engine.data.shards.serve", str(folder), "--port", "0"]
    server = subprocess.Popen(command, stdout=subprocess.PIPE, text=True)
    try:
        line = server.stdout.readline()  # type: ignore[union-attr]
        yield line.split(" at ")[1].split()[0].rstrip("/")
    finally:
        server.terminate()
        server.wait()


def _pattern(where: str, split: str, count: int) -> str:
    return f"{where}/{split}-{{000000..{count - 1:06d}}}.tar"


def template_row(
    name: str, where: str, counts: tuple[int, int], batch: int, workers: int
) -> Candidate:
    """The template's path (train.py's) on the shards at `where` (a folder or URL)."""
    train, val = _pattern(where, "train", counts[0]), _pattern(where, "val", counts[1])
    shards_of = (f'dataset.train_shards="{train}"', f'dataset.val_shards="{val}"')
    stream = ("dataset=iterable", *shards_of, f"dataset.shuffle_buffer={BUFFER}")
    cfg = template_config(*stream, *template_overrides(batch, workers))
    return template_candidate(name, cfg, "train", normalise=False)


def webdataset_row(name: str, pattern: str, batch: int, workers: int, own: bool) -> Candidate:
    """webdataset's pipeline on the same shards: shard shuffle, a BUFFER shuffle, images by
    the template's decoder (or webdataset's own), the same train transforms, a DataLoader."""
    import webdataset as wds

    transform = instantiate(template_config("transforms=imagenet").transforms).train

    def start() -> Iterator[Any]:
        data = wds.WebDataset(pattern, shardshuffle=100, empty_check=False).shuffle(BUFFER)
        if own:
            data = data.decode("torchrgb8").to_tuple("jpg", "cls").map_tuple(transform, int)
        else:
            decode = lambda b: transform(decode_image_bytes(b, ""))  # noqa: E731
            data = data.to_tuple("jpg", "cls").map_tuple(decode, int)
        loader = DataLoader(data, batch_size=batch, num_workers=workers, persistent_workers=True)
        return endless(loader)

    return Candidate(name, start, lambda b: touch(b[0]))


def section(root: Path, out: Path, repeats: int, batch: int, workers: int, log) -> str:
    """Write the shards, time the four rows in interleaved rounds; the table and the ratios."""
    built = write_shards(root, out)
    counts = (len(list(out.glob("train-*.tar"))), len(list(out.glob("val-*.tar"))))
    local = _pattern(str(out), "train", counts[0])
    with served(out) as url:
        rows = [
            template_row(LOCAL, str(out), counts, batch, workers),
            template_row(HTTP, url, counts, batch, workers),
            webdataset_row(WDS_SAME, local, batch, workers, own=False),
            webdataset_row(WDS_OWN, local, batch, workers, own=True),
        ]
        results: Results = interleave(rows, repeats, WARMUP, TIMED, log)
    title = (
        f"Streaming tar shards: 500x375 JPEG, {counts[0]} train shards of {PER_SHARD} "
        f"({built['shards/mb']:.0f} MB with val, written by mode=shards at "
        f"{built['shards/samples_per_s']:.0f} samples/s), train pipeline, uint8 batches, batch "
        f"{batch}, {workers} workers, {TIMED} batches after {WARMUP}"
    )
    ratios = {
        "HTTP loopback / local disk (target >= 0.8x)": (HTTP, LOCAL),
        "template local / webdataset, same decode (target >= 1.0x)": (LOCAL, WDS_SAME),
        "template local / webdataset, its own decode": (LOCAL, WDS_OWN),
    }
    lines = [f"| {k} | {paired_ratio(results, *pair):.2f}x |" for k, pair in ratios.items()]
    table = report.pipeline_table(title, results, LOCAL, "local")
    return "\n".join([table, "", "| ratio, paired per round | median |", "|---|---|", *lines])
