"""WebDataset's rules for what a shard holds, matched exactly: keys, extensions, grouping,
labels from .cls or .json, gzip; every member that fits no rule is a named error."""

from __future__ import annotations

import io
import json
import logging
import re
import sys
from pathlib import Path

import pytest
import webdataset as wds
from braceexpand import braceexpand
from PIL import Image
from webdataset.tariterators import base_plus_ext, group_by_keys, tar_file_expander

from engine.data.bad_samples import BadSample
from engine.data.datasets.tar_shards import TarShardDataset
from engine.data.decode_policy import DecodePolicy
from engine.data.shards import ShardError
from engine.data.shards.manifest import main as write_manifest
from engine.data.shards.members import KEY_EXT, Record, Rules, read_records
from engine.data.shards.sources import expand_shards
from engine_dev.hostile import tar_of
from engine_dev.shard_server import serving

NAMES = [
    "dir/sub_000123.jpg",
    "img.v2.000123.jpg",
    "a.b/c.d.png",
    "x.JPG",
    "./rel.cls",
    "plain",
    "dir/.hidden.jpg",
    ".hidden.jpg",
    "dir.x/noext",
    "a/b/c.tar.gz",
    "k.",
    "__key__.txt",
    "deep/a.b/c.cls",
    "sp ace.jpg",
    "ünï.cödé.json",
]


@pytest.mark.parametrize("name", NAMES)
def test_key_and_extension_split_as_webdataset_does(name: str) -> None:
    match = KEY_EXT.match(name)
    ours = (match.group(1), match.group(2)) if match else (None, None)
    assert ours == base_plus_ext(name)


def _records(data: bytes, rules: Rules | None = None) -> list[Record]:
    return list(read_records(io.BytesIO(data), "s.tar", rules or Rules()))


@pytest.mark.parametrize("gz", [False, True])
def test_samples_group_like_webdataset_plain_and_gzip(gz: bool) -> None:
    members = {
        "dir/sub_000001.jpg": b"J1",
        "dir/sub_000001.cls": b"1",
        "dir/sub_000002.cls": b"0",
        "dir/sub_000002.png": b"P2",
        "dir/sub_000002.jpg": b"J2",
        "__meta__": b"skipped",
        "b/x.webp": b"W3",
        "b/x.cls": b" 4\n",
    }
    data = tar_of(members, gz)
    records = _records(data)
    ours = [(r.name.split("::")[1], r.image, r.label) for r in records]
    assert ours == [
        ("dir/sub_000001.jpg", b"J1", 1),
        ("dir/sub_000002.jpg", b"J2", 0),
        ("b/x.webp", b"W3", 4),
    ]
    theirs = list(group_by_keys(tar_file_expander([{"url": "s", "stream": io.BytesIO(data)}])))
    assert [s["__key__"] for s in theirs] == ["dir/sub_000001", "dir/sub_000002", "b/x"]


@pytest.mark.parametrize("name", ["README", "._a.jpg", "dir.x/noext"])
def test_a_member_without_key_and_extension_is_passed_over_as_webdataset_does(name: str) -> None:
    """macOS `._x.png` and a `README` are no sample's member: webdataset passes them over, also
    in the middle of a sample's members."""
    data = tar_of({"a.jpg": b"J", name: b"x", "a.cls": b"1", "b.png": b"P", "b.cls": b"0"})
    assert _records(data) == [Record("s.tar::a.jpg", b"J", 1), Record("s.tar::b.png", b"P", 0)]
    theirs = list(group_by_keys(tar_file_expander([{"url": "s", "stream": io.BytesIO(data)}])))
    assert [s["__key__"] for s in theirs] == ["a", "b"]


def test_appledouble_files_in_folders_are_passed_over() -> None:
    """A tar macOS made of a folder holds `d/._x.jpg` before each `d/x.jpg`: it stopped the run
    ("extension '_a.jpg' fits no sample rule"). webdataset makes bogus samples of them (key
    `d/`, extension `_a.jpg`); they are no sample's member, as a top-level `._x` is not."""
    members = {"d/._a.jpg": b"mac", "d/a.jpg": b"J", "d/._a.cls": b"mac", "d/a.cls": b"1"}
    data = tar_of({**members, "d/._b.png": b"mac", "d/b.png": b"P", "d/b.cls": b"0"})
    assert _records(data) == [Record("s.tar::d/a.jpg", b"J", 1), Record("s.tar::d/b.png", b"P", 0)]
    theirs = list(group_by_keys(tar_file_expander([{"url": "s", "stream": io.BytesIO(data)}])))
    assert "d/" in [s["__key__"] for s in theirs]


def test_members_without_extension_are_no_samples_of_a_split(tmp_path: Path) -> None:
    """With on_error=skip they were counted as bad samples against max_bad_fraction."""
    shard = tmp_path / "d.tar"
    members = {"README": b"r", "a.jpg": b"J", "a.cls": b"0", "._a.jpg": b"mac", "b.jpg": b"J"}
    shard.write_bytes(tar_of({**members, "b.cls": b"1"}))
    split = TarShardDataset(
        "train", str(shard), str(shard), decode=DecodePolicy(on_error="skip", max_bad_fraction=0.0)
    )
    assert split.shard_sizes == [2]


def test_image_extensions_are_tried_in_order_and_labels_come_from_json() -> None:
    data = tar_of({"k.png": b"P", "k.jpg": b"J", "k.json": json.dumps({"y": 2}).encode()})
    rules = Rules(image_exts=("png", "jpg"), label_field="y")
    assert _records(data, rules) == [Record("s.tar::k.png", b"P", 2)]


@pytest.mark.parametrize(
    ("members", "rules", "message"),
    [
        (
            {"img.v2.000123.jpg": b"J", "img.v2.000123.cls": b"1"},
            Rules(),
            r"s\.tar::img\.v2\.000123\.jpg: extension 'v2\.000123\.jpg' fits no sample rule",
        ),
        (
            {"k.jpg": b"J", "k.txt": b"t", "k.cls": b"1"},
            Rules(),
            r"s\.tar::k\.txt: extension 'txt' fits no sample rule.*dataset\.ignore_exts",
        ),
        ({"k.cls": b"1"}, Rules(), r"s\.tar::k\.cls: a sample without an image"),
        ({"k.jpg": b"J"}, Rules(), r"s\.tar::k\.jpg: a sample without a label \(no \.cls"),
        ({"k.jpg": b"J", "k.cls": b"cat"}, Rules(), r"s\.tar::k\.cls: a \.cls member must hold"),
        (
            {"k.jpg": b"J", "k.json": b"{}"},
            Rules(label_field="y"),
            r"s\.tar::k\.json: no class index \(0, 1, \.\.\.\) in field 'y'",
        ),
        ({"k.jpg": b"J", "k.cls": b"1", "k.JPG": b"J"}, Rules(), r"s\.tar::k\.JPG: a second \.jpg"),
    ],
)
def test_a_member_that_fits_no_rule_is_one_error_naming_shard_and_member(
    members: dict[str, bytes], rules: Rules, message: str
) -> None:
    bad = [r for r in _records(tar_of(members), rules) if r.error]
    assert bad and bad[0].label == -1 and "\n" not in bad[0].error
    assert re.search(message, bad[0].error), bad[0].error


def test_ignored_extensions_are_passed_over() -> None:
    data = tar_of({"k.jpg": b"J", "k.txt": b"caption", "k.cls": b"3"})
    assert _records(data, Rules(ignore_exts=("txt",))) == [Record("s.tar::k.jpg", b"J", 3)]


def test_an_ignored_member_away_from_its_sample_is_passed_over_entirely() -> None:
    """Issue 48: s000.seg.png after s001's members made a sample of its own, 'without an
    image', after the user had listed seg.png in dataset.ignore_exts as the first error said."""
    data = tar_of(
        {
            "s000.png": b"A",
            "s000.cls": b"0",
            "s001.png": b"B",
            "s001.cls": b"1",
            "s000.seg.png": b"M",
        }
    )
    assert _records(data, Rules(ignore_exts=("seg.png",))) == [
        Record("s.tar::s000.png", b"A", 0),
        Record("s.tar::s001.png", b"B", 1),
    ]


def test_a_dataset_stops_at_the_first_rule_error_naming_it(tmp_path: Path) -> None:
    shard = tmp_path / "d.tar"
    shard.write_bytes(tar_of({"a.jpg": b"J", "a.cls": b"0", "img.v2.0001.jpg": b"J"}))
    with pytest.raises(ShardError, match=r"d\.tar::img\.v2\.0001\.jpg: extension 'v2\.0001\.jpg'"):
        TarShardDataset("train", str(shard), str(shard))


@pytest.mark.parametrize("cut", ["boundary", "garbage_after_end"])
def test_data_stopping_on_a_block_boundary_or_after_the_end_is_an_error(cut: str) -> None:
    data = tar_of({"a.jpg": b"J" * 600, "a.cls": b"0", "b.jpg": b"J", "b.cls": b"1"})
    damaged = data[:2048] if cut == "boundary" else data + b"\x01" * 512
    with pytest.raises(ShardError, match=r"s\.tar: (not a readable tar shard|a damaged tar)"):
        _records(damaged)


def test_brace_patterns_expand_as_webdataset_expands_them(tmp_path: Path) -> None:
    for i in range(3):
        (tmp_path / f"t-{i:06d}.tar").touch()
    pattern = f"{tmp_path}/t-{{000000..000002}}.tar"
    assert expand_shards(pattern, "dataset.train_shards") == list(braceexpand(pattern))
    urls = "http://h/{a,b}/x-{08..10}.tar"
    assert expand_shards([urls, "pipe:cat y"], "k") == [*braceexpand(urls), "pipe:cat y"]
    assert wds.SimpleShardList(urls).urls == expand_shards(urls, "k")
    with pytest.raises(FileNotFoundError, match=r"t-000003\.tar' \(from .*\{000000\.\.000003\}"):
        expand_shards(f"{tmp_path}/t-{{000000..000003}}.tar", "dataset.train_shards")


def test_an_fsspec_url_without_fsspec_names_the_key_and_the_extra(monkeypatch) -> None:
    monkeypatch.setitem(sys.modules, "fsspec", None)
    with pytest.raises(ImportError, match=r"dataset\.val_shards: s3://b/x\.tar .*\[remote\]"):
        expand_shards("s3://b/x.tar", "dataset.val_shards")


def test_a_shard_named_twice_is_refused_in_one_line(tmp_path: Path) -> None:
    """webdataset reads a repeated shard twice (upsampling); an epoch here reads each once:
    refused, never deduplicated without a word."""
    (tmp_path / "t-000000.tar").write_bytes(b"")
    (tmp_path / "t-000001.tar").write_bytes(b"")
    patterns = [f"{tmp_path}/t-*.tar", f"{tmp_path}/t-000001.tar"]
    with pytest.raises(
        ValueError, match=r"dataset.train_shards: shard .*t-000001.tar is named twice"
    ):
        expand_shards(patterns, "dataset.train_shards")


def test_a_shard_named_twice_in_two_spellings_is_refused_showing_both(tmp_path: Path) -> None:
    """`..` and a link name the same file: compared by real path, not by the text."""
    (tmp_path / "s").mkdir()
    (tmp_path / "s" / "t-000000.tar").write_bytes(b"")
    (tmp_path / "link.tar").symlink_to(tmp_path / "s" / "t-000000.tar")
    for other in [f"{tmp_path}/s/../s/t-000000.tar", f"{tmp_path}/link.tar"]:
        with pytest.raises(ValueError) as err:
            expand_shards([f"{tmp_path}/s/t-000000.tar", other], "dataset.val_shards")
        message = str(err.value)
        assert message.startswith("dataset.val_shards: shard ") and "named twice" in message
        assert f"and {other}," in message and "\n" not in message


def _png() -> bytes:
    buf = io.BytesIO()
    Image.new("RGB", (4, 4), (200, 10, 10)).save(buf, "PNG")
    return buf.getvalue()


def _stream(split: TarShardDataset) -> list[int | str]:
    """Each sample's label, or a bad one's error."""
    return [s.error if isinstance(s, BadSample) else int(s[1]) for s in split]


def test_a_fix_of_the_member_rules_takes_effect_and_switching_back_reads_again(tmp_path, caplog):
    """A record keeps the rules that shaped it: the fix the error names works at once, and the
    old rules again read the shard again, not a false 'the shard changed'."""
    shard, cache = tmp_path / "d.tar", tmp_path / "cache"
    png = _png()
    shard.write_bytes(
        tar_of({"a.png": png, "a.seg.png": png, "a.cls": b"0", "b.png": png, "b.cls": b"1"})
    )

    def split(**rules: object) -> TarShardDataset:
        return TarShardDataset("train", str(shard), str(shard), manifest_cache=str(cache), **rules)

    with pytest.raises(ShardError, match=r"d\.tar::a\.seg\.png: extension 'seg\.png'.*ignore_exts"):
        split()
    assert _stream(split(ignore_exts="seg.png")) == [0, 1]
    assert _stream(split(ignore_exts="seg.png", shuffle_buffer=1)) == [0, 1]
    again = _stream(split(decode=DecodePolicy("skip", 0.5)))
    assert "extension 'seg.png' fits no sample rule" in again[0] and again[1:] == [1]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cache", "d.tar"]


def test_a_reader_writes_nothing_beside_the_shards_and_keeps_its_record(tmp_path, caplog):
    """Naming a folder's files as shards writes no shards.json there: the reader's record goes
    to dataset.manifest_cache, and the next start reads it instead of the shard."""
    data, cache = tmp_path / "data", tmp_path / "cache"
    data.mkdir()
    (data / "d.tar").write_bytes(tar_of({"a.png": _png(), "a.cls": b"0"}))
    with caplog.at_level(logging.INFO):
        TarShardDataset("train", f"{data}/*.tar", "unused", manifest_cache=str(cache))
        read = [m for m in caplog.messages if m.startswith("read 1 local shards")]
        assert len(read) == 1 and f"kept in {cache}/local-" in read[0]
        caplog.clear()
        assert TarShardDataset("train", f"{data}/*.tar", "u", manifest_cache=str(cache)).classes
    assert [p.name for p in data.iterdir()] == ["d.tar"]
    assert not [m for m in caplog.messages if m.startswith("read ")]
    TarShardDataset("train", f"{data}/*.tar", "unused")  # no cache: read, nothing written
    assert [p.name for p in data.iterdir()] == ["d.tar"]


def test_a_poisoned_record_cannot_rename_the_classes(tmp_path, caplog) -> None:
    """Class names added to the cached count of http(s) shards (which a count never writes)
    are not taken: the shards are counted again and the classes come from their labels."""
    data, cache = tmp_path / "data", tmp_path / "cache"
    data.mkdir()
    (data / "d.tar").write_bytes(tar_of({"a.png": _png(), "a.cls": b"1"}))
    with serving(data) as url:
        first = TarShardDataset("train", f"{url}/d.tar", "u", manifest_cache=str(cache))
        assert first.classes == ["0", "1"]
        (record,) = cache.iterdir()
        poisoned = json.loads(record.read_text()) | {"classes": ["cat", "dog"]}
        record.write_text(json.dumps(poisoned))
        with caplog.at_level(logging.WARNING):
            again = TarShardDataset("train", f"{url}/d.tar", "u", manifest_cache=str(cache))
    assert again.classes == ["0", "1"]
    assert any("holds class names, which a count never writes" in m for m in caplog.messages)


@pytest.mark.parametrize(
    ("poison", "says"),
    [  # a label of 99 made a 100-class model, then a ShardError mid-read naming the shard
        (lambda entry: entry["labels"].__setitem__(0, 99), "holds 1 entries that changed"),
        (lambda entry: entry.update(labels=[0, 0]), "holds 1 entries that changed"),
        (lambda entry: entry.update(labels=[-1, -1]), "at other positions than its labels of -1"),
        (lambda entry: entry.pop("errors"), "lacks errors"),  # once a raw KeyError
    ],
    ids=["label_99", "labels_0", "labels_-1", "no_errors"],
)
def test_an_edited_entry_of_the_readers_record_is_read_again_with_a_warning(
    tmp_path, caplog, poison, says
) -> None:
    data, cache = tmp_path / "data", tmp_path / "cache"
    data.mkdir()
    members = {"a.png": _png(), "a.cls": b"1", "b.png": _png(), "b.cls": b"0"}
    (data / "d.tar").write_bytes(tar_of(members))
    TarShardDataset("train", f"{data}/*.tar", "u", manifest_cache=str(cache))
    (record,) = cache.iterdir()
    content = json.loads(record.read_text())
    poison(next(iter(content["shards"].values())))
    record.write_text(json.dumps(content))
    with caplog.at_level(logging.WARNING):
        again = TarShardDataset("train", f"{data}/*.tar", "u", manifest_cache=str(cache))
    assert again.classes == ["0", "1"] and _stream(again) == [1, 0]
    assert f"the manifest cache {record} " in caplog.text and says in caplog.text
    (first,) = json.loads(record.read_text())["shards"].values()
    assert first["labels"] == [1, 0]  # written again as read


def test_a_manifest_beside_the_shards_is_read_and_never_rewritten(tmp_path, caplog) -> None:
    """The manifest a writer left (here the CLI's) holds under rules that only widen its own;
    under narrower ones the shard is read again into the reader's record, the manifest kept."""
    shard, cache = tmp_path / "d.tar", tmp_path / "cache"
    shard.write_bytes(tar_of({"a.png": _png(), "a.cls": b"0", "b.jpg": b"J", "b.cls": b"1"}))
    write_manifest([str(shard), "--out", str(tmp_path / "shards.json")])
    written = (tmp_path / "shards.json").read_bytes()
    with caplog.at_level(logging.INFO):
        wider = TarShardDataset(
            "train", str(shard), "u", manifest_cache=str(cache), ignore_exts="txt"
        )
        assert wider.shard_sizes == [2] and not cache.exists()
        with pytest.raises(
            ShardError, match=r"d\.tar::b\.jpg: extension 'jpg' fits no sample rule"
        ):
            TarShardDataset("train", str(shard), "u", manifest_cache=str(cache), image_exts="png")
    assert (tmp_path / "shards.json").read_bytes() == written
    assert len(list(cache.iterdir())) == 1


def test_a_manifest_cache_that_is_a_file_is_one_line_naming_the_key(tmp_path: Path) -> None:
    """Issue 48: it was a raw NotADirectoryError from a read under the file."""
    shard, cache = tmp_path / "s.tar", tmp_path / "cachefile"
    shard.write_bytes(tar_of({"k.jpg": b"J", "k.cls": b"0"}))
    cache.write_text("not a folder")
    with pytest.raises(ValueError, match=r"dataset\.manifest_cache=.*cachefile is a file, not a"):
        TarShardDataset("train", str(shard), "u", manifest_cache=str(cache))
