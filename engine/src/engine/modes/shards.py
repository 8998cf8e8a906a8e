"""`mode=shards` (`make shards`): write the train and val images of the configured map-style
dataset (imagefolder, csv, cache, tensor, parquet) into files of `shards.max_samples` samples in
`shards.dir`, in one of two formats (`shards.format`):

- `tar`: WebDataset tar shards with their manifest (`shards.json`,
  engine/data/shards/manifest.py) and `classes.txt`, for `dataset=iterable` from that folder or
  wherever it is uploaded (engine/docs/streaming.md). A sample is `KEY.jpg|png|webp` (the image),
  `KEY.cls` (its class index) and `KEY.json` (label, class name, source file), as webdataset
  itself writes and reads them.
- `parquet`: Parquet files in the Hugging Face layout (engine/data/parquet/writer.py), for
  `dataset=parquet` or `datasets.load_dataset("parquet", ...)`; multi-label data too.

Samples go in a seeded random order (shards.shuffle), so that every file mixes the classes.
"""

from __future__ import annotations

import logging
import re
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from hydra.utils import instantiate
from omegaconf import DictConfig
from torch.utils.data import Dataset
from torchcodec.encoders import JpegEncoder, PngEncoder

from engine.core.io import atomic_write_bytes, output_folder, write_json
from engine.core.progress import EVERY_S, counted
from engine.data.cache_store import is_jpeg_quality
from engine.data.datasets.image_files import LabelledImageFiles
from engine.data.decode import load_sample
from engine.data.loaders import scan_loader
from engine.data.parquet.writer import FILE_NAME, ParquetSplitWriter, file_names, recorded_files
from engine.data.resolve_loader import resolve_loader_settings
from engine.data.samplers import SequentialOrder
from engine.data.shards.manifest import NAME, Manifest
from engine.data.shards.writer import (
    EXTRA,
    SHARD_NAME,
    SplitWriter,
    brace_pattern,
    shard_names,
    writing,
)
from engine.data.splits import build_splits
from engine.data.targets import refuse_multi_label
from engine.data.transforms import Pipelines
from engine.modes.cache import READ_BATCH, load_shrunk, shrink
from engine.modes.inside_data import refuse_inside_the_data
from engine.modes.no_streams import refuse_a_stream
from engine.runs.outputs import save_resolved_config

log = logging.getLogger(__name__)
EVERY = re.compile(f"{SHARD_NAME.pattern}|{FILE_NAME.pattern}")  # either format's files

ENCODINGS = ("keep", "jpeg", "png")  # keep: the image files' own bytes
FORMATS = ("tar", "parquet")
KEPT = {b"\xff\xd8": "jpg", b"\x89PNG": "png", b"RIFF": "webp"}  # first bytes: extension


@dataclass(frozen=True)
class ShardSettings:
    """The `shards` config group (see engine/conf/shards/default.yaml)."""

    dir: str
    max_samples: int
    short_side: int | None
    encoding: str
    jpeg_quality: int
    compress: bool
    shuffle: bool
    seed: int
    overwrite: bool
    format: str = "tar"
    row_group_rows: int = 100

    def __post_init__(self) -> None:
        if self.format not in FORMATS:
            raise ValueError(f"shards.format={self.format!r}: expected one of {FORMATS}.")
        for key in ("max_samples", "row_group_rows", "short_side"):
            value = getattr(self, key)
            if (value is not None or key != "short_side") and not (
                isinstance(value, int) and not isinstance(value, bool) and value >= 1
            ):
                raise ValueError(f"shards.{key}={value!r}: expected an int >= 1.")
        if self.encoding not in ENCODINGS:
            raise ValueError(f"shards.encoding={self.encoding!r}: expected one of {ENCODINGS}.")
        if self.encoding == "keep" and self.short_side is not None:
            raise ValueError(
                "shards.short_side needs shards.encoding=jpeg or png: keep stores the image "
                "files as they are."
            )
        if not is_jpeg_quality(self.jpeg_quality):
            raise ValueError(f"shards.jpeg_quality={self.jpeg_quality!r}: expected 1 to 100.")


class _Encoded(Dataset):
    """Sample `order[i]` of `files` as (image bytes, extension, label, source file)."""

    def __init__(self, files: Dataset, order: np.ndarray, settings: ShardSettings) -> None:
        self.files, self.order, self.settings = files, order, settings

    def __len__(self) -> int:
        return len(self.order)

    def __getitem__(self, i: int) -> tuple[bytes, str, int | list[int], str]:
        files, side, index = self.files, self.settings.short_side, int(self.order[i])
        target = files.targets[index]  # type: ignore[attr-defined]
        label = np.flatnonzero(target).tolist() if np.ndim(target) else int(target)
        source = files.get_filename(index) if hasattr(files, "get_filename") else ""
        if not isinstance(files, LabelledImageFiles):
            image = files[index][0]
            image = shrink(image, side) if side else image
        elif side:
            image = load_shrunk(files, index, side)
        else:
            name = files.label_name(index)
            limits = files.max_image_pixels, files.max_jpeg_scans
            image = load_sample(source, index, name, None, *limits)
        if self.settings.encoding == "keep":
            data = Path(source).read_bytes()
            ext = next((e for magic, e in KEPT.items() if data.startswith(magic)), None)
            if ext is not None and (ext != "webp" or data[8:12] == b"WEBP"):
                return data, ext, label, source
        if image.dtype != torch.uint8:
            raise ValueError(
                f"mode=shards stores 8-bit images and {type(files).__name__} gives "
                f"{image.dtype} ones: store the inputs as uint8 images (N x C x H x W) first."
            )
        if self.settings.encoding == "jpeg":
            data, ext = JpegEncoder(image).to_tensor(quality=self.settings.jpeg_quality), "jpg"
        else:
            data, ext = PngEncoder(image).to_tensor(), "png"
        return data.numpy().tobytes(), ext, label, source


def refuse_keep(files: Dataset, settings: ShardSettings) -> None:
    """shards.encoding=keep on a dataset that reads no image files: refused before shards.dir
    is touched (no lock left behind, nothing replaced)."""
    if settings.encoding == "keep" and not isinstance(files, LabelledImageFiles):
        raise ValueError(
            f"shards.encoding=keep stores image files as they are, and {type(files).__name__} "
            "reads none: set shards.encoding=png (lossless) or jpeg."
        )


def write_split(
    files: Dataset,
    split: str,
    folder: Path,
    settings: ShardSettings,
    workers: int,
    timeout: float,
    every_s: float = EVERY_S,
) -> dict[str, dict]:
    """Write every sample of `files` into shards in `folder`; their manifest entries."""
    refuse_keep(files, settings)
    count = len(files)  # type: ignore[arg-type]
    rng = np.random.default_rng(settings.seed)
    order = rng.permutation(count) if settings.shuffle else np.arange(count)
    batches = scan_loader(
        _Encoded(files, order, settings), READ_BATCH, list, workers, None, timeout
    )
    classes = list(files.classes)  # type: ignore[attr-defined]
    if settings.format == "parquet":
        multi = bool(getattr(files, "multi_label", False))
        table = ParquetSplitWriter(
            folder, split, count, classes, multi, settings.max_samples, settings.row_group_rows
        )
        for batch in counted(batches, count, f"parquet {split}", READ_BATCH, every_s):
            for image, _, label, source in batch:
                table.add(image, Path(source).name if source else "", label)
        table.close()
        return table.entries
    writer = SplitWriter(folder, split, settings.max_samples, settings.compress)
    done = 0
    for batch in counted(batches, count, f"shards {split}", READ_BATCH, every_s):
        for image, ext, label, source in batch:
            meta = {"label": label, "class": classes[label], "source": source}
            writer.add(f"{split}-{done:08d}", image, ext, label, meta)
            done += 1
    writer.close()
    return writer.entries


def _own_files(settings: ShardSettings, counts: dict[str, int]) -> tuple[list[str], dict]:
    """The files this write makes in shards.dir for splits of `counts` samples, and how
    `writing` tells an earlier write's own files from others' of their names."""
    if settings.format == "tar":
        size, compress = settings.max_samples, settings.compress
        tars = [n for s, count in counts.items() for n in shard_names(s, count, size, compress)]
        return [*EXTRA, *tars], {"every": EVERY}
    files = [n for s, count in counts.items() for n in file_names(s, count, settings.max_samples)]
    return files, {"names": FILE_NAME, "extra": (), "recorded": recorded_files, "every": EVERY}


def shards(cfg: DictConfig) -> dict[str, float]:
    """Write the train and val splits of the configured dataset as shards; metrics.json."""
    start = time.perf_counter()
    out = Path(cfg.paths.output_dir)
    save_resolved_config(cfg, out)
    settings: ShardSettings = instantiate(cfg.shards)
    train, val = build_splits(cfg.dataset, Pipelines([], []), folds=False)  # whole, as stored
    refuse_inside_the_data(Path(settings.dir), "shards.dir", cfg.dataset, (train, val))
    refuse_a_stream((train, val), "shards")
    folder = output_folder(settings.dir, "shards.dir")
    tar = settings.format == "tar"
    if tar:
        refuse_multi_label(train, "mode=shards shards.format=tar")
    for files in (train, val):
        refuse_keep(files, settings)
    loader = resolve_loader_settings(instantiate(cfg.loader), train, SequentialOrder, cuda=False)
    workers = loader.num_workers
    planned, names = _own_files(settings, {"train": len(train), "val": len(val)})  # type: ignore[arg-type]
    with writing(folder, settings.overwrite, planned, **names):
        entries: dict[str, dict] = {}
        for split, files in (("train", train), ("val", val)):
            every_s = cfg.trainer.log_every_n_seconds  # progress lines off a terminal
            entries |= write_split(files, split, folder, settings, workers, loader.timeout, every_s)
        if tar:
            classes = list(train.classes)  # type: ignore[attr-defined]
            Manifest(str(folder / NAME), classes, entries).save()
            atomic_write_bytes(folder / "classes.txt", "".join(f"{c}\n" for c in classes).encode())
    wall = time.perf_counter() - start
    samples = sum(entry["samples"] for entry in entries.values())
    metrics = {
        "shards/samples_per_s": samples / wall,
        "shards/samples": float(samples),
        "shards/shards": float(len(entries)),
        "shards/mb": sum(entry["size"] for entry in entries.values()) / 2**20,
        "wall_s": wall,
    }
    write_json(out / "metrics.json", metrics)
    rate, size = metrics["shards/samples_per_s"], metrics["shards/mb"]
    if not tar:
        log.info(
            "shards: %d samples in %d Parquet files in %s (%.0f MB, %.0f samples/s); train from "
            "them with dataset=parquet dataset.root=%s",
            *(samples, len(entries), folder, size, rate, folder),
        )
        return metrics
    overrides = " ".join(
        f"'dataset.{split}_shards=\"{brace_pattern(folder, split, entries)}\"'"
        for split in ("train", "val")
    )
    log.info(
        "shards: %d samples in %d shards in %s (%.0f MB, %.0f samples/s); train from them with "
        "dataset=iterable %s",
        *(samples, len(entries), folder, size, rate, overrides),
    )
    return metrics
