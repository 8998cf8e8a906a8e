"""Rows for the pip peers, when installed (`make bench-peers`): timm's `create_loader` (its
CPU prefetcher: uint8 collate, one normalise per batch) and NVIDIA DALI's CPU-only pipeline
(ROI decoding for the random crop, its own threads). Both give normalised float batches."""

from __future__ import annotations

import importlib.util
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import torch

from bench.image_rows import CROP, MEAN, RESIZE, STD
from bench.timing import Candidate, touch


def available() -> dict[str, bool]:
    """Which peers import here."""
    return {name: importlib.util.find_spec(name) is not None for name in ("timm", "nvidia.dali")}


def timm_row(root: Path, split: str, batch: int, workers: int) -> Candidate:
    import timm.data

    def start() -> Iterator[Any]:
        loader = timm.data.create_loader(
            timm.data.ImageDataset(str(root / split)),
            input_size=(3, CROP, CROP),
            batch_size=batch,
            is_training=split == "train",
            color_jitter=None,
            interpolation="bilinear",
            mean=tuple(MEAN),
            std=tuple(STD),
            num_workers=workers,
            crop_pct=CROP / RESIZE,
            device=torch.device("cpu"),
            use_prefetcher=True,
        )
        while True:
            yield from loader

    return Candidate("timm create_loader (CPU prefetcher)", start, lambda b: touch(b[0]))


def dali_row(root: Path, split: str, batch: int, threads: int) -> Candidate:
    from nvidia.dali import fn, pipeline_def, types
    from nvidia.dali.plugin.pytorch import DALIGenericIterator, LastBatchPolicy

    @pipeline_def(batch_size=batch, num_threads=threads, device_id=None)  # CPU only
    def pipeline():  # type: ignore[no-untyped-def]
        files, labels = fn.readers.file(
            file_root=str(root / split), random_shuffle=split == "train", name="reader"
        )
        if split == "train":
            images = fn.decoders.image_random_crop(files, device="cpu", output_type=types.RGB)
            images = fn.resize(images, resize_x=CROP, resize_y=CROP)
            mirror = fn.random.coin_flip()
        else:
            images = fn.decoders.image(files, device="cpu", output_type=types.RGB)
            images = fn.resize(images, resize_shorter=RESIZE)
            mirror = 0
        images = fn.crop_mirror_normalize(
            images,
            dtype=types.FLOAT,
            output_layout="CHW",
            crop=(CROP, CROP),
            mirror=mirror,
            mean=[255 * m for m in MEAN],
            std=[255 * s for s in STD],
        )
        return images, labels

    def start() -> Iterator[Any]:
        pipe = pipeline()
        pipe.build()
        batches = DALIGenericIterator(
            pipe,
            ["images", "labels"],
            reader_name="reader",
            last_batch_policy=LastBatchPolicy.DROP,
            auto_reset=True,
        )
        while True:
            for out in batches:
                yield out[0]["images"]

    return Candidate("DALI CPU-only", start, touch)
