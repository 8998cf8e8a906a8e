"""mode=shards on the engine's own: shrunk, re-encoded, gzipped shards from a CSV listing that
webdataset reads, its settings checked naming the key, and labels from a JSON field of shards
webdataset's ShardWriter wrote (the manifest saying which field it read). Shards the project's
dataset groups train on: the template's tests/test_shard_writer.py."""

from __future__ import annotations

from pathlib import Path

import pytest
import webdataset as wds

from engine.data.datasets.tar_shards import TarShardDataset
from engine.data.shards.manifest import main as write_manifest
from engine.modes.shards import ShardSettings, shards


def _write(reference_cfg, out: Path, *overrides: str) -> dict[str, float]:
    return shards(
        reference_cfg("s", "mode=shards", f"shards.dir={out}", "shards.max_samples=16", *overrides)
    )


def test_shrunk_jpeg_gzip_shards_from_a_csv_listing(reference_cfg, tmp_path) -> None:
    out = tmp_path / "shards"
    _write(
        reference_cfg,
        out,
        "dataset=csv",
        "shards.short_side=24",
        "shards.encoding=jpeg",
        "shards.compress=true",
        "shards.shuffle=false",
    )
    read = wds.WebDataset(f"{out}/val-{{000000..000001}}.tar.gz", shardshuffle=False)
    images = [s["jpg"] for s in read.decode("torchrgb8")]
    assert len(images) == 30 and all(min(x.shape[1:]) <= 24 for x in images)
    data = TarShardDataset("val", "unused", f"{out}/val-*.tar.gz", shuffle_buffer=1)
    assert [int(y) for _, y in data] == sorted(int(y) for _, y in data)  # dataset order


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"encoding": "keep", "short_side": 64}, r"shards\.short_side needs shards\.encoding"),
        ({"max_samples": 0}, r"shards\.max_samples=0: expected an int >= 1"),
        ({"encoding": "webp"}, r"shards\.encoding='webp': expected one of"),
        ({"format": "zip"}, r"shards\.format='zip': expected one of \('tar', 'parquet'\)"),
        ({"format": "parquet", "row_group_rows": 0}, r"shards\.row_group_rows=0: expected an int"),
    ],
)
def test_settings_name_the_key(changes: dict, message: str) -> None:
    values = {
        "dir": "x",
        "max_samples": 10,
        "short_side": None,
        "encoding": "jpeg",
        "jpeg_quality": 90,
        "compress": False,
        "shuffle": True,
        "seed": 0,
        "overwrite": False,
    }
    with pytest.raises(ValueError, match=message):
        ShardSettings(**(values | changes))


def test_labels_from_a_json_field_of_webdatasets_shards(demo_dir, tmp_path) -> None:
    out = tmp_path / "json"
    images = sorted((demo_dir / "imagefolder" / "val").glob("*/*"))
    with wds.ShardWriter(f"{out}-%06d.tar", maxcount=100, verbose=0) as sink:
        for i, path in enumerate(images):
            meta = {"y": i % 5, "caption": path.name}
            sink.write({"__key__": f"k{i:04d}", path.suffix[1:]: path.read_bytes(), "json": meta})
    data = TarShardDataset("val", "unused", f"{out}-000000.tar", label_field="y")
    assert sorted(int(y) for _, y in data) == sorted(i % 5 for i in range(len(images)))
    write_manifest(
        [f"{out}-000000.tar", "--out", str(tmp_path / "shards.json"), "--label-field", "y"]
    )
    with pytest.raises(
        ValueError, match=r"does not hold for .*: labels from json:y were read, not cls"
    ):
        TarShardDataset("val", "unused", f"file://{out}-000000.tar")  # remote: not read again
