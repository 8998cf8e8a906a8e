"""Where a writer's output folder (mode=cache's cache.dir, mode=shards' shards.dir) must not be:
a folder the dataset reads from, or one inside it, where what it writes would mix with the
data's own files (and be listed as data, or replace a file of the same name). The folders are
every one the dataset config names (dataset.root, a CSV file's, a classes file's, at any
depth: dataset=mix's sources) and every one holding a file the splits list (the images of a
CSV, wherever they are)."""

from __future__ import annotations

import os
import re
from collections.abc import Iterator, Sequence
from pathlib import Path

from omegaconf import DictConfig, OmegaConf
from torch.utils.data import Dataset

PATH_KEY = re.compile(r"(^|_)(root|csv|path|paths|file|files|dir|manifest)$")  # keys naming paths


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
        if isinstance(value, str) and value and os.path.exists(value):
            if os.path.isdir(value):
                yield value, key
            else:
                yield os.path.dirname(value) or ".", f"the folder of {key}={value}"


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
    folder: Path, key: str, dataset: DictConfig, splits: Sequence[Dataset]
) -> None:
    """Refuse an output folder (`key`: cache.dir, shards.dir) that is a folder the dataset
    reads from or inside one, naming it and what names it."""
    out = folder.resolve()
    for data, source in data_folders(dataset, splits).items():
        if out == data or out.is_relative_to(data):
            named = f"{source}={data}" if source.startswith("dataset.") else f"{data} ({source})"
            raise ValueError(
                f"{key}={folder} is inside {named}, which the dataset reads from: what it writes "
                f"would mix with the dataset's own files; set {key} to a folder outside it."
            )
