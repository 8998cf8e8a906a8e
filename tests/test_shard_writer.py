"""mode=shards writes WebDataset shards webdataset itself reads, sample for sample, and the
project's dataset=iterable trains on, from the image folders or a pre-resized cache; shards
webdataset's ShardWriter wrote train here too. The writer on its own (re-encoding, gzip, its
settings, labels from a JSON field): the engine's tests/test_shard_writer.py."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import webdataset as wds

from engine.data.datasets.imagefolder import ImageFolderDataset
from engine.data.datasets.tar_shards import TarShardDataset
from engine.metric_keys import METRICS_BY_MODE
from engine.modes.cache import cache
from engine.modes.shards import shards
from engine_dev.shard_server import write_wds_shards
from src.loop import train


def _write(make_cfg, out: Path, *overrides: str) -> dict[str, float]:
    return shards(make_cfg("mode=shards", f"shards.dir={out}", "shards.max_samples=16", *overrides))


def test_mode_shards_writes_what_webdataset_reads_and_training_uses(
    make_cfg, demo_dir, tmp_path, caplog
) -> None:
    out = tmp_path / "shards"
    with caplog.at_level("INFO", logger="engine.modes.shards"):
        metrics = _write(make_cfg, out)
    assert set(metrics) == set(METRICS_BY_MODE["shards"])
    assert metrics["shards/samples"] == 78 and metrics["shards/shards"] == 5
    names = sorted(p.name for p in out.iterdir())
    assert names == [
        ".shards.lock",  # the writer's mark: its files, and that the set is whole
        "classes.txt",
        "shards.json",
        *(f"train-{i:06d}.tar" for i in range(3)),
        "val-000000.tar",
        "val-000001.tar",
    ]
    files = ImageFolderDataset(str(demo_dir / "imagefolder"), "train")
    expected = sorted(
        (Path(files.get_filename(i)).read_bytes(), int(files.targets[i])) for i in range(len(files))
    )
    read = wds.WebDataset(f"{out}/train-{{000000..000002}}.tar", shardshuffle=False).decode()
    samples = list(read.to_tuple("jpg;png", "cls", "json", handler=wds.reraise_exception))
    assert len(samples) == 48
    assert all(meta["label"] == label for _, label, meta in samples)
    raw = wds.WebDataset(f"{out}/train-{{000000..000002}}.tar", shardshuffle=False)
    assert sorted((s.get("jpg", s.get("png")), int(s["cls"])) for s in raw) == expected
    line = next(r.getMessage() for r in caplog.records if "train from them" in r.getMessage())
    overrides = re.findall(r"'(dataset\.\w+_shards=\"[^']+\")'", line)
    assert overrides == [
        f'dataset.train_shards="{out}/train-{{000000..000002}}.tar"',
        f'dataset.val_shards="{out}/val-{{000000..000001}}.tar"',
    ]
    result = train(make_cfg("dataset=iterable", *overrides, "trainer.max_epochs=1"))
    assert 0.0 <= result["val/acc"] <= 1.0
    manifest = json.loads((out / "shards.json").read_text())
    assert manifest["classes"] == files.classes
    assert (out / "shards.json").stat().st_mode & 0o777 == 0o644  # a server may read it
    assert TarShardDataset("val", "unused", f"{out}/val-*.tar").classes == files.classes


def test_png_shards_from_a_pre_resized_cache(make_cfg, tmp_path) -> None:
    cached = tmp_path / "cache"
    cache(make_cfg("mode=cache", f"cache.dir={cached}", "cache.short_side=32"))
    out = tmp_path / "shards"
    metrics = _write(
        make_cfg, out, "dataset=cache", f"dataset.root={cached}", "shards.encoding=png"
    )
    assert metrics["shards/samples"] == 78
    samples = list(TarShardDataset("train", f"{out}/train-*.tar", "unused"))
    assert len(samples) == 48 and all(min(x.shape[1:]) <= 32 for x, _ in samples)
    with pytest.raises(ValueError, match=r"shards\.encoding=keep stores image files as they are"):
        _write(make_cfg, tmp_path / "keep", "dataset=cache", f"dataset.root={cached}")


def test_shards_from_webdatasets_shardwriter_train_here(make_cfg, demo_dir, tmp_path) -> None:
    out = tmp_path / "wds"
    for split in ("train", "val"):
        write_wds_shards(demo_dir / "imagefolder" / split, out, split, "{split}_{i:06d}")
    result = train(
        make_cfg(
            "dataset=iterable",
            f"dataset.train_shards={out}/train-*.tar",
            f"dataset.val_shards={out}/val-*.tar",
            "trainer.max_epochs=1",
        )
    )
    assert 0.0 <= result["val/acc"] <= 1.0
