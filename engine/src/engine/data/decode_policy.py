"""`dataset.decode`: how a dataset kind reads its images, one checked object handed to every
kind (imagefolder, csv, parquet, iterable, cache) in place of six keys passed one by one
through each constructor.

The keys moved from the dataset node in engine 3.0.0 (`dataset.on_error` is now
`dataset.decode.on_error`, `dataset.reduced_decode` `dataset.decode.reduced`,
`dataset.decode_device` `dataset.decode.device`); `MOVED` maps them, and for this major
version `moved_overrides` (the command line) and `move_old_keys` (a project's YAML, a
checkpoint's saved config) read the old spellings, each with one warning."""

from __future__ import annotations

import logging
import re
from collections.abc import Iterator, MutableMapping
from contextlib import nullcontext
from dataclasses import dataclass
from typing import Any, Literal

from omegaconf import DictConfig, open_dict

from engine.core.bounds import Fraction, Pixels, Positive
from engine.data.bad_samples import check_policy
from engine.data.encoded import check_decode_device
from engine.data.image_header import MAX_JPEG_SCANS, PILLOW_MAX_PIXELS

log = logging.getLogger(__name__)

TARGET = "engine.data.decode_policy.DecodePolicy"  # the decode node's _target_
# the dataset node's keys of engine 2.x, and their place in dataset.decode
MOVED = {
    "on_error": "on_error",
    "max_bad_fraction": "max_bad_fraction",
    "max_image_pixels": "max_image_pixels",
    "max_jpeg_scans": "max_jpeg_scans",
    "reduced_decode": "reduced",
    "decode_device": "device",
}


@dataclass(frozen=True)
class DecodePolicy:
    """What to do with an unreadable image, what a header may declare before the decode, and
    where and how small the decode runs (conf/dataset/*.yaml `decode:` says each key)."""

    on_error: Literal["raise", "skip"] = "raise"
    max_bad_fraction: Fraction = 0.01
    max_image_pixels: Pixels | None = PILLOW_MAX_PIXELS
    max_jpeg_scans: Positive | None = MAX_JPEG_SCANS
    reduced: bool = True
    device: Literal["cpu", "main", "cuda"] = "cpu"

    def __post_init__(self) -> None:
        check_policy(self.on_error, self.max_bad_fraction)
        check_decode_device(self.device)

    def only_in_workers(self, kind: str) -> DecodePolicy:
        """This policy, for a dataset kind whose images are decoded in the loader workers
        alone (`kind`: its config option): dataset.decode.device=main|cuda refused in one line."""
        if self.device != "cpu":
            raise ValueError(
                f"dataset.decode.device={self.device}: dataset={kind} decodes its images in the "
                "loader workers only; set dataset.decode.device=cpu."
            )
        return self


# an override of an old key of any dataset node (dataset.on_error=skip, a mix source's
# dataset.sources.a.dataset.decode_device=main, +dataset.max_jpeg_scans=10, a sweep's a,b)
_OLD_OVERRIDE = re.compile(rf"^([+~]*)(dataset(?:\.[\w-]+)*?)\.({'|'.join(MOVED)})(?==|$)")


def _said(moved: list[tuple[str, str]], where: str) -> str | None:
    """One line naming the old keys of `moved` and the new ones to write in `where`."""
    if not moved:
        return None
    return (
        f"{', '.join(old for old, _ in moved)} moved in engine 3.0.0 into the dataset's decode "
        f"node (read as such, for one major version): write {', '.join(n for _, n in moved)} "
        f"in {where}"
    )


def moved_overrides(args: list[str]) -> tuple[list[str], str | None]:
    """The command line with each old decode key of a dataset node spelled as its new one,
    and the warning that says so (None: none): `dataset.on_error=skip` still runs, where Hydra
    would refuse a key the node no longer has. The caller says it once logging is set up."""
    moved, out = [], []
    for arg in args:
        match = _OLD_OVERRIDE.match(arg)
        if match is None or match.group(2).endswith(".decode"):
            out.append(arg)
            continue
        signs, node, old = match.groups()
        new = f"{node}.decode.{MOVED[old]}"
        moved.append((f"{node}.{old}", new))
        out.append(f"{signs}{new}{arg[match.end() :]}")
    return out, _said(moved, "your command line")


def _dataset_nodes(node: Any, path: str) -> Iterator[tuple[str, MutableMapping]]:
    """(key, node) of `node` and of every dataset node under it (a mix's sources)."""
    if isinstance(node, MutableMapping):
        if "_target_" in node:
            yield path, node
        for key in list(node):
            if key != "decode":
                yield from _dataset_nodes(node[key], f"{path}.{key}")


def move_old_keys(dataset: Any, where: str) -> None:
    """Move the old decode keys of the dataset node `dataset` (a config's, or a checkpoint's
    saved config: `where` names it) and of its sources into their `decode` node, made where
    missing; one warning names them. An old key's value wins over the decode node's: no
    config of the engine or the template holds the old keys, so it can only be the user's."""
    moved = []
    for path, node in _dataset_nodes(dataset, "dataset"):
        old = [key for key in MOVED if key in node]
        if not old:
            continue
        with open_dict(node) if isinstance(node, DictConfig) else nullcontext():
            if node.get("decode") is None:
                node["decode"] = {"_target_": TARGET}
            decode = node["decode"]
            for key in old:
                decode[MOVED[key]] = node.pop(key)
                moved.append((f"{path}.{key}", f"{path}.decode.{MOVED[key]}"))
    if moved:
        log.warning(_said(moved, where))
