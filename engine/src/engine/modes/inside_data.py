"""Where a writer's output folder (mode=cache's cache.dir, mode=shards' shards.dir) must not be:
a folder the dataset reads from, or one inside it, where what it writes would mix with the
data's own files (and be listed as data, or replace a file of the same name), nor one whose
split folders (mode=cache's cache.dir/train, cache.dir/val) are, lie in or hold such a folder.
The folders are every one the dataset config names (dataset.root, a CSV file's, a classes
file's, each local shard's of dataset.train_shards: globs and brace ranges expanded, at any
depth: dataset=mix's sources) and every one holding a file the splits list (the images of a
CSV, wherever they are)."""

from __future__ import annotations

import glob
import os
import re
from collections.abc import Iterator, Sequence
from pathlib import Path

from braceexpand import UnbalancedBracesError, braceexpand
from omegaconf import DictConfig, OmegaConf
from torch.utils.data import Dataset

from engine.data.shards.sources import kind

PATH_KEY = re.compile(r"(^|_)(root|csv|path|paths|file|files|dir|manifest|shards)$")  # paths
SHARDS_KEY = re.compile(r"(^|_)shards$")  # patterns: brace ranges, globs, URLs


def _local(value: str, key: str) -> list[str]:
    """The existing local paths `value` names: itself, or for a shard pattern (`key` like
    train_shards) every local file its brace ranges and globs match (URLs and pipe: are not
    folders here)."""
    if not SHARDS_KEY.search(key):
        return [value] if os.path.exists(value) else []
    try:
        names = list(braceexpand(value))
    except UnbalancedBracesError:  # the reader names it; here it is a plain path
        names = [value]
    return [path for name in names if kind(name) == "local" for path in glob.glob(name)]


def _named(node: object, key: str) -> Iterator[tuple[str, str]]:
    """(folder, what names it) of each existing path a key like root, train_csv or
    classes_file names under `node` (the value of `key`)."""
    if isinstance(node, dict):
        for name, value in node.items():
            yield from _named(value, f"{key}.{name}")
        return
    if not PATH_KEY.search(key.rpartition(".")[2]):
        return
    for value in node if isinstance(node, list) else [node]:
        for path in _local(value, key) if isinstance(value, str) and value else []:
            if os.path.isdir(path):
                yield path, key
            else:
                yield os.path.dirname(path) or ".", f"the folder of {key}={value}"


def data_folders(dataset: DictConfig, splits: Sequence[Dataset]) -> dict[Path, str]:
    """Each folder the dataset reads from (resolved), with what names it: a config key, or
    words."""
    container = OmegaConf.to_container(dataset, resolve=True)
    folders: dict[Path, str] = {}
    for folder, named in _named(container, "dataset"):
        folders.setdefault(Path(folder).resolve(), named)
    for files in splits:
        listed: dict[str, str] = {}
        for i in range(len(files) if hasattr(files, "get_filename") else 0):  # type: ignore[arg-type]
            path = files.get_filename(i)  # type: ignore[attr-defined]
            if path is None:
                break
            listed.setdefault(os.path.dirname(path) or ".", path)
        for folder, path in listed.items():
            folders.setdefault(Path(folder).resolve(), f"the folder of the listed file {path}")
    return folders


def refuse_inside_the_data(
    folder: Path,
    key: str,
    dataset: DictConfig,
    splits: Sequence[Dataset],
    subfolders: Sequence[str] = (),
) -> None:
    """Refuse an output folder (`key`: cache.dir, shards.dir) that is a folder the dataset
    reads from or inside one, or whose `subfolders` (the ones the writer fills: cache.dir/train)
    are, lie in or hold one, naming it and what names it. A folder merely above the data
    (cache.dir=/data, data in /data/raw) is left alone: nothing is written among its files."""
    out = folder.resolve()
    targets = [(out, "")] + [(out / name, f" (its {name}/ folder)") for name in subfolders]
    for data, source in data_folders(dataset, splits).items():
        named = f"{source}={data}" if source.startswith("dataset.") else f"{data} ({source})"
        for target, its in targets:
            if target == data or target.is_relative_to(data):
                where = "is inside"
            elif its and data.is_relative_to(target):
                where = "holds"
            else:
                continue
            raise ValueError(
                f"{key}={folder}{its} {where} {named}, which the dataset reads from: what it "
                f"writes would mix with the dataset's own files; set {key} to a folder outside it."
            )
