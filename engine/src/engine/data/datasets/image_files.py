"""Map-style dataset over labelled image files, stored as compact arrays."""

from __future__ import annotations

import os
from collections.abc import Sequence

import numpy as np
import torch

from engine.data.bad_samples import BadSample
from engine.data.datasets.base import DecodedSamples, MapDataset, Transform
from engine.data.decode import SampleError, load_sample, sample_errors
from engine.data.decode_policy import DecodePolicy
from engine.data.encoded import Encoded, encode_sample
from engine.data.listing import unique_classes
from engine.data.safe_read import max_file_bytes, read_regular_file
from engine.data.targets import is_multi_hot, label_text
from engine.data.transforms import decode_min_side


class LabelledImageFiles(DecodedSamples, MapDataset):
    """Images listed by path with integer targets, or multi-hot ones (multi-label).

    Paths live in one fixed-width bytes array (given as one, or as strings) and targets in one
    int64 array (multi-label: a uint8 N x classes array, each sample's label then a float32
    multi-hot tensor), so forked workers share them without copy-on-read growth (no per-sample
    Python objects).
    `decode` (engine/data/decode_policy.py) says how the files are read: with
    `on_error="skip"` an unreadable file gives a `BadSample` record instead of an error (see
    engine/data/bad_samples.py), `max_bad_fraction` bounds how many a split may have; with
    `reduced`, JPEGs at least twice the size the transform's first Resize asks for are decoded
    at 1/2, 1/4 or 1/8 scale (engine/data/decode.py); an image declaring more than
    `max_image_pixels` pixels, or a JPEG of more than `max_jpeg_scans` scans (None: no limit),
    is unreadable, refused before it is decoded; with `device` main or cuda, a loader's
    workers send each JPEG's bytes undecoded, with its crop (`sends_encoded`, set by the
    loader: engine/data/encoded.py).
    """

    files_checkable = True

    def __init__(
        self,
        paths: Sequence[str] | np.ndarray,
        targets: Sequence[int] | np.ndarray,  # N ints, or N x classes 0/1 (multi-label)
        classes: Sequence[str],
        transform: Transform | None = None,
        decode: DecodePolicy | None = None,
    ) -> None:
        decode = decode or DecodePolicy()
        self.decode_device = decode.device
        self.max_image_pixels, self.max_jpeg_scans = decode.max_image_pixels, decode.max_jpeg_scans
        self.on_error, self.max_bad_fraction = decode.on_error, decode.max_bad_fraction
        self._paths = (
            paths  # already encoded by the listing (no Python object per path on the way)
            if isinstance(paths, np.ndarray) and paths.dtype.kind == "S"
            else np.array([os.fsencode(p) for p in paths], dtype=np.bytes_)
        )
        self.multi_label = is_multi_hot(np.asarray(targets))
        self.targets = np.asarray(targets, dtype=np.uint8 if self.multi_label else np.int64)
        self.classes = unique_classes(classes, multi_label=self.multi_label)
        self.class_to_idx = {name: i for i, name in enumerate(self.classes)}
        self.transform = transform
        self.decode_min_side = decode_min_side(transform) if decode.reduced else None

    def __len__(self) -> int:
        return len(self.targets)

    def get_filename(self, index: int) -> str:
        """The file behind sample `index` (to trace a bad batch back to its images)."""
        return os.fsdecode(self._paths[index])

    def label_name(self, index: int) -> str | None:
        """The class name of sample `index`, for messages (None: an unlabelled input;
        multi-label: its classes joined by `|`)."""
        return label_text(self.targets[index], self.classes)

    def label(self, index: int) -> int | torch.Tensor:
        """The target of sample `index`: its class index, or its float32 multi-hot row."""
        if self.multi_label:
            return torch.from_numpy(self.targets[index].astype(np.float32))
        return int(self.targets[index])

    def _encoded(self, index: int) -> Encoded:
        """Sample `index`'s bytes for a decode in the main process, its declared size checked;
        a SampleError naming the file if it cannot be read."""
        path, geometry = self.get_filename(index), self.sends_encoded
        assert geometry is not None  # set by the loader with sends_encoded
        with sample_errors(path, index, self.label_name(index)):
            data = read_regular_file(path, max_file_bytes(self.max_image_pixels))
            limits = self.max_image_pixels, self.max_jpeg_scans
            return encode_sample(data, path, index, geometry, *limits)

    def _decoded(self, index: int, min_side: int | None = None) -> torch.Tensor:
        """Sample `index` decoded (no transform); a SampleError naming the file if it cannot be."""
        path, limits = self.get_filename(index), (self.max_image_pixels, self.max_jpeg_scans)
        return load_sample(path, index, self.label_name(index), min_side, *limits)

    def __getitem__(self, index: int) -> tuple[torch.Tensor, int | torch.Tensor] | BadSample:
        label = self.label(index)
        try:
            if self.sends_encoded is not None:
                return self._encoded(index), label
            image = self._decoded(index, self.decode_min_side)
        except SampleError as err:
            return self._skip_or_raise(index, err)
        if self.transform is not None:
            image = self.transform(image)
        return image, label
