"""mode=cache and mode=shards read a dataset sample by sample by index (its image files, its
length), which a stream (an IterableDataset: dataset=iterable) has not: refused in one line
before either writes anything, saying what to do instead."""

from __future__ import annotations

from collections.abc import Sequence

from torch.utils.data import Dataset, IterableDataset

INSTEAD = {
    "cache": "train from the shards directly (dataset=iterable), or cache the images they were "
    "written from (mode=cache dataset=imagefolder or dataset=csv)",
    "shards": "the shards are read directly (dataset=iterable), or write new ones from the "
    "images they were written from (mode=shards dataset=imagefolder or dataset=csv)",
}


def refuse_a_stream(splits: Sequence[Dataset], mode: str) -> None:
    """Raise ValueError when a split of `splits` is a stream, which `mode` cannot write."""
    for split, files in zip(("train", "val"), splits, strict=False):
        if isinstance(files, IterableDataset):
            raise ValueError(
                f"mode={mode}: the {split} split ({type(files).__name__}) is a stream (an "
                f"IterableDataset, e.g. dataset=iterable), which mode={mode} cannot "
                f"{'cache' if mode == 'cache' else 're-shard'}: {INSTEAD[mode]}."
            )
