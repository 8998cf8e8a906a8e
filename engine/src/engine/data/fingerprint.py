"""What a checkpoint remembers of the data it was trained on, to tell later whether a run
resumed from it reads the same samples under the same indices: the train split's size and a
hash of its listing (each sample's file, relative to the folder the files share, and label,
in index order). File contents are not read: a file overwritten under its name goes unseen.

Hashing a million file names takes about a second, once per start; an order drawn over a
changed listing would put other samples into the rest of an interrupted epoch, silently.
"""

from __future__ import annotations

import hashlib
import os
from typing import Any

import numpy as np
from torch.utils.data import Dataset, IterableDataset


def _digest(chunks: Any) -> str:
    h = hashlib.sha256()
    for chunk in chunks:
        h.update(chunk)
    return h.hexdigest()[:16]


def listing_fingerprint(dataset: Dataset) -> dict[str, Any]:
    """{size, files, labels}: the number of samples and hashes of their file names (None when
    the dataset has none: `get_filename`) and of their labels (None without `targets`)."""
    targets = getattr(dataset, "targets", None)
    stream = isinstance(dataset, IterableDataset) and targets is not None
    size = len(targets) if stream else len(dataset)  # type: ignore[arg-type]  # a stream's len is per rank
    name = dataset.get_filename  # type: ignore[attr-defined]
    files = None
    if size and not stream and name(0) is not None:
        names = [str(name(i)) for i in range(size)]
        # relative to the folder they share: data staged to another place ($TMPDIR of a
        # requeued job) is the same listing
        try:
            top = os.path.commonpath([os.path.dirname(n) for n in names])
        except ValueError:  # absolute and relative names mixed: kept as they are
            top = ""
        files = _digest(
            f"{os.path.relpath(n, top) if top else n}\n".encode("utf-8", "surrogateescape")
            for n in names
        )
    labels = None if targets is None else _digest([np.asarray(targets, np.int64).tobytes()])
    return {"size": size, "files": files, "labels": labels}


def listing_change(saved: dict[str, Any], now: dict[str, Any]) -> str | None:
    """How the listing `now` differs from `saved`, in words (None: the same)."""
    if saved["size"] != now["size"]:
        diff = now["size"] - saved["size"]
        what = f"{diff} added" if diff > 0 else f"{-diff} removed"
        return (
            f"the train split has {now['size']} samples, the checkpoint's {saved['size']} ({what})"
        )
    if saved["files"] != now["files"]:
        return (
            f"the train split's {now['size']} files are not the checkpoint's (renamed, reordered, "
            "or some removed and as many added)"
        )
    if saved["labels"] != now["labels"]:
        return "the train split's files are the checkpoint's, but their labels differ (relabelled)"
    return None
