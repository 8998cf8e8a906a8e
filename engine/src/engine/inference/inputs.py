"""The images mode=predict reads: a folder (searched recursively), a CSV with a path column, or
one image file; as a dataset of unlabelled images decoded as the training decoded its own."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from engine.data.datasets.base import Transform
from engine.data.datasets.image_files import LabelledImageFiles
from engine.data.datasets.imagefolder import FolderWalk
from engine.data.decode import IMAGE_SUFFIXES
from engine.data.decode_policy import DecodePolicy
from engine.data.listing import read_csv_rows


def list_inputs(given: str | None, path_column: str) -> list[str]:
    """The image files `predict.input` names, in a fixed order: a folder's images (by suffix,
    recursively, sorted; symlinked folders and files followed as torchvision's ImageFolder
    follows them, a link loop entered once), a CSV's `path_column`
    (relative paths resolve against the CSV's folder), or the one file given."""
    if given is None:
        raise ValueError(
            "predict.input is null: set it to a folder of images, a CSV with a path column "
            "(predict.path_column) or one image file."
        )
    path = Path(given).expanduser()
    if path.is_dir():
        images = FolderWalk(path).images(str(path))
        if not images:
            raise ValueError(
                f"predict.input={given}: no files with an image suffix {IMAGE_SUFFIXES} in it."
            )
        return images
    if path.suffix.lower() == ".csv" and path.is_file():
        rows = read_csv_rows(path, {"predict.path_column": path_column}, "utf-8")
        listed = [os.path.join(path.parent, row[0].strip()) for _, row in rows]
        if not listed:
            raise ValueError(f"predict.input={given}: the CSV lists no images.")
        return listed
    if path.is_file():
        return [str(path)]
    raise FileNotFoundError(
        f"predict.input={given}: no such file or folder; give a folder of images, a CSV with "
        "a path column or one image file."
    )


class InputImages(LabelledImageFiles):
    """Unlabelled image files (every label reads 0), decoded like a dataset's: its `decode`
    policy (reduced decoding, pixel and scan limits, on_error; skip: listed in
    bad_samples.csv)."""

    def __init__(
        self,
        paths: Sequence[str],
        transform: Transform | None = None,
        decode: DecodePolicy | None = None,
    ) -> None:
        super().__init__(
            paths, np.zeros(len(paths), dtype=np.int64), ["(unlabelled)"], transform, decode
        )

    def label_name(self, index: int) -> str | None:
        """None: an input has no class (errors name its file and index only)."""
        return None
