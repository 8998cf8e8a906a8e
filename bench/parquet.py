"""The Parquet rows of `make bench`: dataset=parquet next to tar shards (dataset=iterable) and
the image folder itself, on the same 500x375 JPEGs, each written by the template's mode=shards
(Parquet: files of 512 rows in row groups of 100, as the Hub's image sets use, and for the
row-group rows also of 16 and 512; tar: shards of 128). Every row: the uint8 train pipeline (RandomResizedCrop 224 + flip) or the val pipeline
(Resize 256 + CenterCrop 224), persistent workers, the timed window over several epochs.
Parquet's train order reads row groups in runs (engine/data/samplers.py block_order).

    python -m bench --only parquet   # `make bench-parquet`: this section, into its block
"""

from __future__ import annotations

from datetime import date
from pathlib import Path

from bench import report
from bench.image_rows import template_overrides
from bench.shards import BUFFER, PER_SHARD, _pattern, write_shards
from bench.template import template_candidate, template_config
from bench.timing import Candidate, Results, interleave, paired_ratio
from engine.modes.shards import shards

BLOCK = "make bench-parquet"
WARMUP, TIMED = 4, 40  # batches; 16 per epoch of 1024 images at batch 64
GROUP_ROWS = 100  # rows per row group, what the Hub's image datasets are written with
OTHER_GROUPS = (16, 512)  # the row-group sizes measured beside it (train order only)
FILE_ROWS = 512
FOLDER, TAR, PARQUET = "imagefolder", "tar shards (dataset=iterable)", "Parquet (dataset=parquet)"


def write_parquet(root: Path, out: Path, group_rows: int) -> dict[str, float]:
    """The template's mode=shards shards.format=parquet over `root`, written anew into `out`."""
    where = (f"dataset.root={root}", f"shards.dir={out}", f"shards.max_samples={FILE_ROWS}")
    options = ("shards.format=parquet", f"shards.row_group_rows={group_rows}")
    extra = ("shards.overwrite=true", "loader.num_workers=2")
    return shards(template_config("mode=shards", "dataset=imagefolder", *where, *options, *extra))


def parquet(folder: Path) -> tuple[str, ...]:
    return ("dataset=parquet", f"dataset.root={folder}")


def _row(name: str, split: str, dataset: tuple[str, ...], batch: int, workers: int) -> Candidate:
    cfg = template_config(*dataset, *template_overrides(batch, workers))
    return template_candidate(f"{name}, {split}", cfg, split, normalise=False)


def section(root: Path, out: Path, repeats: int, batch: int, workers: int, log) -> str:
    """Write both formats, time the rows (three sources x train, val; Parquet's train order at
    other row-group sizes) in interleaved rounds; the table and the ratios."""
    written = write_parquet(root, out / "parquet", GROUP_ROWS)
    for rows in OTHER_GROUPS:
        write_parquet(root, out / f"parquet{rows}", rows)
    write_shards(root, out / "tar")
    counts = [len(list((out / "tar").glob(f"{s}-*.tar"))) for s in ("train", "val")]
    tar = (
        "dataset=iterable",
        f'dataset.train_shards="{_pattern(str(out / "tar"), "train", counts[0])}"',
        f'dataset.val_shards="{_pattern(str(out / "tar"), "val", counts[1])}"',
        f"dataset.shuffle_buffer={BUFFER}",
    )
    sources = {
        FOLDER: ("dataset=imagefolder", f"dataset.root={root}"),
        TAR: tar,
        PARQUET: parquet(out / "parquet"),
    }
    rows = [
        _row(name, split, dataset, batch, workers)
        for split in ("train", "val")
        for name, dataset in sources.items()
    ]
    rows += [
        _row(f"{PARQUET}, row groups of {n}", "train", parquet(out / f"parquet{n}"), batch, workers)
        for n in OTHER_GROUPS
    ]
    results: Results = interleave(rows, repeats, WARMUP, TIMED, log)
    title = (
        f"Parquet beside tar shards and the folder: 500x375 JPEG, Parquet files of {FILE_ROWS} "
        f"rows in row groups of {GROUP_ROWS} ({written['shards/mb']:.0f} MB with val, written by "
        f"mode=shards shards.format=parquet at {written['shards/samples_per_s']:.0f} "
        f"samples/s), tar shards of {PER_SHARD}, uint8 batches, batch {batch}, {workers} "
        f"workers, {TIMED} batches after {WARMUP}"
    )
    ratios = (
        {
            f"Parquet / tar shards, {split} (target >= 0.9x)": (
                f"{PARQUET}, {split}",
                f"{TAR}, {split}",
            )
            for split in ("train", "val")
        }
        | {
            f"Parquet / imagefolder, {split}": (f"{PARQUET}, {split}", f"{FOLDER}, {split}")
            for split in ("train", "val")
        }
        | {
            f"Parquet train, row groups of {n} / of {GROUP_ROWS}": (
                f"{PARQUET}, row groups of {n}, train",
                f"{PARQUET}, train",
            )
            for n in OTHER_GROUPS
        }
    )
    lines = [f"| {k} | {paired_ratio(results, *pair):.2f}x |" for k, pair in ratios.items()]
    table = report.pipeline_table(title, results, f"{TAR}, train", "tar train")
    head = (
        f"## Parquet beside tar shards and the image folder: `make bench-parquet` "
        f"({date.today().isoformat()})\n\n`make bench-parquet` (= `python -m bench --only "
        f"parquet --repeats {repeats}`; also part of `make bench`). Machine: {report.machine()}."
    )
    ratio_table = ["| ratio, paired per round | median |", "|---|---|", *lines]
    return "\n".join([head, "", table, "", *ratio_table])
