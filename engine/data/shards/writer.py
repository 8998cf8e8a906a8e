"""Writing WebDataset tar shards (mode=shards): one split's samples into
`{split}-NNNNNN.tar` (or `.tar.gz`) files of at most `max_samples` each, as
`KEY.<image ext>`, `KEY.cls` and `KEY.json` members, with the manifest entry of each shard."""

from __future__ import annotations

import io
import json
import tarfile
from pathlib import Path

from engine.data.shards.manifest import NAME


def _add(tar: tarfile.TarFile, name: str, data: bytes) -> None:
    info = tarfile.TarInfo(name)
    info.size, info.mode = len(data), 0o644
    tar.addfile(info, io.BytesIO(data))


class SplitWriter:
    """One split's samples into `{split}-NNNNNN.tar[.gz]` files of `max_samples` each (gzip
    with `compress`); the manifest entry of each shard it closed in `entries`."""

    def __init__(self, folder: Path, split: str, max_samples: int, compress: bool) -> None:
        self.folder, self.split = folder, split
        self.max_samples, self.compress = max_samples, compress
        self.entries: dict[str, dict] = {}
        self.tar: tarfile.TarFile | None = None
        self.labels: list[int] = []

    def add(self, key: str, image: bytes, ext: str, label: int, meta: dict) -> None:
        """Sample `key`: its image (`ext`: jpg, png, webp), class index and JSON metadata."""
        if self.tar is None:
            suffix = ".tar.gz" if self.compress else ".tar"
            self.name = f"{self.split}-{len(self.entries):06d}{suffix}"
            mode = "w:gz" if self.compress else "w"
            kwargs = {"compresslevel": 6} if self.compress else {}
            self.tar = tarfile.open(self.folder / self.name, mode, **kwargs)  # noqa: SIM115
        _add(self.tar, f"{key}.{ext}", image)
        _add(self.tar, f"{key}.cls", str(label).encode())
        _add(self.tar, f"{key}.json", json.dumps(meta).encode())
        self.labels.append(label)
        if len(self.labels) == self.max_samples:
            self.close()

    def close(self) -> None:
        """Finish the open shard (if any) and record its manifest entry."""
        if self.tar is None:
            return
        self.tar.close()
        stat = (self.folder / self.name).stat()
        self.entries[self.name] = {
            "samples": len(self.labels),
            "labels": self.labels,
            "label_from": "cls",
            "errors": [],
            "size": stat.st_size,
            "mtime_ns": stat.st_mtime_ns,
        }
        self.tar, self.labels = None, []


def clear_shards(folder: Path, overwrite: bool) -> None:
    """Refuse (or with shards.overwrite, remove) the shards of an earlier run in `folder`."""
    ours = [*folder.glob("train-*.tar*"), *folder.glob("val-*.tar*")]
    ours += [p for p in (folder / NAME, folder / "classes.txt") if p.exists()]
    if ours and not overwrite:
        raise FileExistsError(
            f"shards.dir: {folder} already holds shards ({ours[0].name}, ...); set "
            "shards.overwrite=true to replace them, or choose another shards.dir."
        )
    for path in ours:
        path.unlink()


def brace_pattern(folder: Path, split: str, entries: dict[str, dict]) -> str | None:
    """`folder/train-{000000..000041}.tar`: the brace pattern of one split's shards."""
    names = sorted(name for name in entries if name.startswith(f"{split}-"))
    if not names:
        return None
    suffix = names[0].removeprefix(f"{split}-000000")
    return f"{folder}/{split}-{{000000..{len(names) - 1:06d}}}{suffix}"
