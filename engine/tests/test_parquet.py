"""dataset=parquet on files built here: the Hugging Face layout read by split name (ClassLabel
names, string and list labels, plain binary images), every bad label and every hostile file
refused in one line naming the file and the row (or row group), or left out under
dataset.decode.on_error=skip; the train order reads row groups in runs."""

from __future__ import annotations

import io
import logging
import os
import re
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import torch
from PIL import Image

from engine.data.datasets.parquet import ParquetDataset
from engine.data.decode import SampleError, decode_image_bytes
from engine.data.decode_policy import DecodePolicy
from engine.data.parquet.files import ParquetFileError
from engine.data.parquet.layout import schema_for
from engine.data.samplers import RandomOrder, block_order
from engine_dev.shard_server import Faults, serving

NAMES = ["cat", "dog", "owl"]


def _jpeg(seed: int, size: tuple[int, int] = (40, 30)) -> bytes:
    pixels = np.random.default_rng(seed).integers(0, 255, (size[1], size[0], 3), np.uint8)
    out = io.BytesIO()
    Image.fromarray(pixels).save(out, "JPEG", quality=90)
    return out.getvalue()


def _write(path: Path, labels: list, schema: pa.Schema | None = None, group: int = 4) -> list:
    """A file of one JPEG per label (the Image struct unless `schema` says otherwise)."""
    schema = schema or schema_for(NAMES, multi_label=False)
    images = [_jpeg(hash((path.name, i)) % 2**32) for i in range(len(labels))]
    struct = pa.types.is_struct(schema.field(0).type)
    column = [{"bytes": b, "path": f"{i}.jpg"} for i, b in enumerate(images)] if struct else images
    table = pa.table({schema.names[0]: column, schema.names[1]: labels}, schema=schema)
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(table, path, row_group_size=group)
    return images


@pytest.fixture
def hub(tmp_path: Path) -> tuple[Path, list[bytes]]:
    """A dataset as the Hub lays it out: two train files, one validation file, a test file
    and a README, under data/."""
    root = tmp_path / "hub"
    images = _write(root / "data" / "train-00000-of-00002.parquet", [0, 1, 2, 0, 1, 2, 0])
    images += _write(root / "data" / "train-00001-of-00002.parquet", [1, 1, 2, 2, 0])
    _write(root / "data" / "validation-00000-of-00001.parquet", [2, 0, 1])
    _write(root / "data" / "test-00000-of-00001.parquet", [0])
    (root / "README.md").write_text("# a dataset card\n")
    return root, images


def test_the_hub_layout_is_read_by_split_name_with_its_class_names(hub) -> None:
    root, images = hub
    train = ParquetDataset("train", str(root))
    val = ParquetDataset("val", str(root), classes=train.classes)
    assert train.classes == NAMES and len(train) == 12 and len(val) == 3
    assert train.targets.tolist() == [0, 1, 2, 0, 1, 2, 0, 1, 1, 2, 2, 0]
    assert not train.multi_label
    image, label = train[8]
    assert label == 1 and torch.equal(image, decode_image_bytes(images[8], "x"))
    assert train.get_filename(8) == f"{root}/data/train-00001-of-00002.parquet#row=1"
    assert train.blocks.tolist() == [0, 4, 7, 11]  # row groups of 4: 4+3 rows, then 4+1
    assert len(ParquetDataset("test", str(root), classes=NAMES)) == 1


def test_globs_string_labels_list_labels_and_plain_binary_images(tmp_path: Path) -> None:
    plain = pa.schema([("png", pa.binary()), ("tags", pa.list_(pa.string()))])
    _write(tmp_path / "a" / "part-0.parquet", [["x"], ["y", "x"], []], plain)
    multi = ParquetDataset(
        "train", str(tmp_path), train_files="a/part-*.parquet", image_column="png",
        label_column="tags",
    )  # fmt: skip
    assert multi.multi_label and multi.classes == ["x", "y"]
    assert multi.targets.tolist() == [[1, 0], [1, 1], [0, 0]]
    assert multi[1][1].tolist() == [1.0, 1.0]
    words = pa.schema([("image", pa.binary()), ("label", pa.string())])
    _write(tmp_path / "b" / "train.parquet", ["zebra", "ant", "zebra"], words)
    single = ParquetDataset("train", str(tmp_path / "b"))
    assert single.classes == ["ant", "zebra"] and single.targets.tolist() == [1, 0, 1]


def test_a_missing_split_or_column_names_what_is_there(hub) -> None:
    root, _ = hub
    (root / "data" / "validation-00000-of-00001.parquet").unlink()
    with pytest.raises(FileNotFoundError, match=r"no Parquet file of the val split.*val_files"):
        ParquetDataset("val", str(root), classes=NAMES)
    with pytest.raises(ParquetFileError) as err:
        ParquetDataset("train", str(root), image_column="img")
    said = str(err.value)
    assert "dataset.image_column='img'" in said and "its columns: image, label" in said
    assert "train-00000-of-00002.parquet" in said and "\n" not in said


@pytest.mark.parametrize(
    ("labels", "said"),
    [
        ([0, 1, -1], "row 2: label -1, which Hugging Face datasets writes for a row without"),
        ([0, 5, 1], "row 1: label 5 (dataset.label_column) is not a class index 0..2"),
        ([0, None, 1], "row 1: no label in column 'label'"),
    ],
)
def test_a_bad_label_is_refused_naming_file_and_row(tmp_path: Path, labels, said) -> None:
    _write(tmp_path / "train-0.parquet", labels)
    with pytest.raises(ParquetFileError, match=re.escape(said)) as err:
        ParquetDataset("train", str(tmp_path))
    assert "train-0.parquet" in str(err.value)


def test_a_val_label_outside_the_train_classes_names_file_and_row(tmp_path: Path) -> None:
    words = pa.schema([("image", pa.binary()), ("label", pa.string())])
    _write(tmp_path / "val-0.parquet", ["ant", "moth"], words)
    with pytest.raises(ParquetFileError, match=r"val-0.parquet: row 1: label 'moth'.*train"):
        ParquetDataset("val", str(tmp_path), classes=["ant", "bee"])


def _hostile(folder: Path) -> dict[str, str]:
    """Four bad files beside one good one: file name -> what its error must say."""
    good = folder / "train-00000.parquet"
    _write(good, [0, 1, 2, 0, 1, 2, 0, 1])
    whole = good.read_bytes()
    (folder / "train-00001.parquet").write_bytes(whole[: len(whole) // 2])  # cut short
    footer = int.from_bytes(whole[-8:-4], "little")  # the footer, after a body cut in half
    body = whole[: (len(whole) - footer - 8) // 2]
    (folder / "train-00002.parquet").write_bytes(body + whole[-footer - 8 :])
    wrong = pa.schema([("image", pa.int64()), ("label", pa.int64())])
    pq.write_table(pa.table({"image": [1, 2], "label": [0, 1]}, schema=wrong),
                   folder / "train-00003.parquet")  # fmt: skip
    (folder / "train-00004.parquet").write_bytes(b"not a parquet file at all\n" * 20)
    return {
        "train-00001.parquet": "cannot be read as Parquet",
        "train-00002.parquet": "its footer places column",
        "train-00003.parquet": "holds int64, not encoded images",
        "train-00004.parquet": "cannot be read as Parquet",
    }


def test_hostile_files_stop_in_one_line_each_or_are_left_out(tmp_path: Path, caplog) -> None:
    bad = _hostile(tmp_path)
    for name, said in bad.items():
        with pytest.raises(ParquetFileError) as err:
            ParquetDataset("train", str(tmp_path), train_files=[name])
        message = str(err.value)
        assert name in message and said in message and "\n" not in message
        assert "dataset.decode.on_error=skip" in message
    with caplog.at_level(logging.WARNING):
        kept = ParquetDataset("train", str(tmp_path), decode=DecodePolicy(on_error="skip"))
    assert len(kept) == 8 and [f for f in bad if f not in caplog.text] == []
    assert sorted(kept.left_out) == sorted(str(tmp_path / f) for f in bad)


def test_a_row_group_over_the_limit_is_refused_before_it_is_read(tmp_path: Path) -> None:
    _write(tmp_path / "train-0.parquet", [0, 1, 2, 0], group=2)
    with pytest.raises(ParquetFileError, match=r"row group 0 \(rows 0-1\) declares .* bytes"):
        ParquetDataset("train", str(tmp_path), max_row_group_bytes=100)


def test_a_damaged_row_group_names_its_rows_or_is_skipped_row_by_row(tmp_path: Path) -> None:
    path = tmp_path / "train-0.parquet"
    _write(path, [0, 1, 2, 0, 1, 2], group=3)
    meta = pq.ParquetFile(path).metadata.row_group(1).column(0)
    data = bytearray(path.read_bytes())  # the second row group's image pages overwritten
    start = min(o for o in (meta.dictionary_page_offset, meta.data_page_offset) if o)
    data[start : start + meta.total_compressed_size] = b"\xff" * meta.total_compressed_size
    path.write_bytes(bytes(data))
    strict = ParquetDataset("train", str(tmp_path))
    assert strict[0][1] == 0  # the first row group reads
    with pytest.raises(
        SampleError,
        match=r"sample 4 .*/train-0.parquet#row=4: its row group cannot be read: .*on_error=skip",
    ):
        strict[4]
    lenient = ParquetDataset("train", str(tmp_path), decode=DecodePolicy(on_error="skip"))
    bad = [lenient[i] for i in range(3, 6)]
    assert [b.path for b in bad] == [f"{path}#row={i}" for i in range(3, 6)]


def test_the_train_order_reads_row_groups_in_runs_and_repeats_per_epoch() -> None:
    starts = np.arange(0, 1000, 100)  # ten row groups of 100
    first = block_order(1000, starts, 250, torch.Generator().manual_seed(3))
    again = block_order(1000, starts, 250, torch.Generator().manual_seed(3))
    other = block_order(1000, starts, 250, torch.Generator().manual_seed(4))
    assert torch.equal(first, again) and not torch.equal(first, other)
    assert sorted(first.tolist()) == list(range(1000))
    groups = first // 100
    for window in groups.split(250):
        assert len(set(window.tolist())) <= 4  # 250 positions span at most 4 row groups
    assert (groups[:-1] != groups[1:]).float().mean() > 0.5  # yet neighbours differ


def test_sampler_random_on_parquet_follows_its_row_groups(hub) -> None:
    root, _ = hub
    train = ParquetDataset("train", str(root), shuffle_window=4)
    order = RandomOrder(train, seed=0)
    order.set_epoch(1)
    drawn = list(order)
    assert sorted(drawn) == list(range(12))
    block = np.searchsorted(train.blocks, drawn, side="right") - 1
    for i in range(0, 12, 4):
        assert len(set(block[i : i + 4].tolist())) <= 2


def test_a_label_past_int64_is_refused_naming_file_and_row(tmp_path: Path) -> None:
    named = schema_for(NAMES, multi_label=False)  # ClassLabel names, uint64 labels
    schema = pa.schema([named.field(0), ("label", pa.uint64())], metadata=named.metadata)
    _write(tmp_path / "train-0.parquet", [0, 2**63 + 1], schema)
    with pytest.raises(
        ParquetFileError, match=r"train-0.parquet: row 1: label 9223372036854775809"
    ):
        ParquetDataset("train", str(tmp_path))


def test_what_is_no_regular_file_is_named_not_dropped(tmp_path: Path, caplog) -> None:
    _write(tmp_path / "train-00000.parquet", [0, 1, 2, 0])
    os.mkfifo(tmp_path / "train-00001.parquet")
    (tmp_path / "train-00002.parquet").symlink_to("/dev/zero")
    (tmp_path / "train-00003.parquet").symlink_to(tmp_path / "gone.parquet")
    said = {"train-00001.parquet": "a FIFO", "train-00002.parquet": "a device"}
    said["train-00003.parquet"] = "a link to nothing"
    for name, what in said.items():
        with pytest.raises(ParquetFileError, match=rf"{name} is {what}, not a Parquet file"):
            ParquetDataset("train", str(tmp_path), train_files=[name])
    with caplog.at_level(logging.WARNING):
        kept = ParquetDataset("train", str(tmp_path), decode=DecodePolicy(on_error="skip"))
    assert len(kept) == 4 and all(name in caplog.text for name in said)


def test_a_split_without_rows_says_so(tmp_path: Path) -> None:
    _write(tmp_path / "train-0.parquet", [])
    with pytest.raises(ParquetFileError, match=r"train split's files hold no rows \(.*train-0"):
        ParquetDataset("train", str(tmp_path))


def test_a_file_without_row_groups_shifts_no_row_names(tmp_path: Path) -> None:
    pq.ParquetWriter(tmp_path / "train-00000.parquet", schema_for(NAMES, False)).close()
    _write(tmp_path / "train-00001.parquet", [0, 1, 2, 0, 1, 2], group=4)
    data = ParquetDataset("train", str(tmp_path))
    assert data.get_filename(5) == f"{tmp_path}/train-00001.parquet#row=5"
    assert data.blocks.tolist() == [0, 4]


def test_a_damaged_label_column_is_one_printable_line(tmp_path: Path) -> None:
    path = tmp_path / "train-0.parquet"
    _write(path, [0, 1, 2, 0], group=4)
    meta = pq.ParquetFile(path).metadata.row_group(0)
    label = next(
        meta.column(c) for c in range(meta.num_columns) if meta.column(c).path_in_schema == "label"
    )
    data = bytearray(path.read_bytes())
    start = min(o for o in (label.dictionary_page_offset, label.data_page_offset) if o)
    data[start : start + label.total_compressed_size] = b"\x0f" * label.total_compressed_size
    path.write_bytes(bytes(data))
    with pytest.raises(ParquetFileError) as err:
        ParquetDataset("train", str(tmp_path))
    said = str(err.value)
    assert "its column 'label' cannot be read" in said and said.isprintable()


@pytest.mark.parametrize("spelling", ["./hub", "hub//", "hub/.", "hub/data/.."])
def test_any_spelling_of_the_root_finds_its_files(hub, monkeypatch, spelling: str) -> None:
    root, _ = hub
    monkeypatch.chdir(root.parent)
    assert len(ParquetDataset("train", spelling)) == 12


def test_split_words_end_in_a_dot_or_name_a_spark_folder(tmp_path: Path) -> None:
    _write(tmp_path / "train.00000.parquet", [0, 1])
    _write(tmp_path / "val.00000.parquet", [1])
    assert len(ParquetDataset("train", str(tmp_path))) == 2
    assert len(ParquetDataset("val", str(tmp_path), classes=NAMES)) == 1
    _write(tmp_path / "validation.parquet" / "part-00000.parquet", [2])  # a Spark folder
    assert len(ParquetDataset("val", str(tmp_path), classes=NAMES)) == 1
    # as in datasets: a folder naming a split makes the folders decide, for every split
    with pytest.raises(FileNotFoundError, match=r"the folder names decided the splits here, "
                       r"placing 1 of its 3 files in others"):  # fmt: skip
        ParquetDataset("train", str(tmp_path))


def test_forked_workers_open_their_own_files_at_an_fsspec_root(hub) -> None:
    from torch.utils.data import DataLoader

    root, images = hub
    data = ParquetDataset("train", f"file://{root}")
    data[0]  # the main process opens a file before the workers fork
    loader = DataLoader(data, batch_size=None, num_workers=2, multiprocessing_context="fork")
    got = [image for image, _ in loader]
    assert all(torch.equal(got[i], decode_image_bytes(images[i], "x")) for i in range(12))


class _Lying:
    """`obj` with some attributes replaced: a footer that declares what its pages do not."""

    def __init__(self, obj: object, **lies: object) -> None:
        self._obj, self._lies = obj, lies

    def __getattr__(self, name: str) -> object:
        return self._lies[name] if name in self._lies else getattr(self._obj, name)


def _footer_lying(pf: pq.ParquetFile, rows: int | None = None, offsets: bool = False) -> _Lying:
    """`pf` whose row group 0 declares `rows` rows, or whose column chunks give no page offset."""
    meta = pf.metadata

    def group(g: int) -> object:
        real = meta.row_group(g)
        if offsets:
            chunk = lambda c: _Lying(real.column(c), dictionary_page_offset=0, data_page_offset=0)  # noqa: E731
            return _Lying(real, column=chunk)
        return _Lying(real, num_rows=rows) if g == 0 else real

    return _Lying(pf, metadata=_Lying(meta, row_group=group))


def test_footers_that_lie_are_named_in_one_line(tmp_path: Path) -> None:
    """A row group of -1 rows was refused as too many bytes (a fix that did nothing); zero page
    offsets a raw `min() arg is an empty sequence`; two columns of one name a raw KeyError."""
    from engine.data.parquet.files import check_layout

    path = tmp_path / "train-0.parquet"
    _write(path, [0, 1, 2, 0])
    pf, size = pq.ParquetFile(path), path.stat().st_size
    with pytest.raises(
        ParquetFileError, match=r"row group 0 declares -1 rows of .* the footer is damaged"
    ):
        check_layout(_footer_lying(pf, rows=-1), str(path), size, "image", "label", 2**30)
    with pytest.raises(ParquetFileError, match=r"its footer places column .* at bytes 0-"):
        check_layout(_footer_lying(pf, offsets=True), str(path), size, "image", "label", 2**30)
    twice = pa.schema([("image", pa.binary()), ("label", pa.int64()), ("label", pa.int64())])
    pq.write_table(pa.table([[b"x"], [0], [1]], schema=twice), path)
    with pytest.raises(
        ParquetFileError, match=r"label_column='label': .* has 2 columns of that name"
    ):
        ParquetDataset("train", str(tmp_path))


def _varint(data: bytes, at: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        value, at, shift = value | (data[at] & 0x7F) << shift, at + 1, shift + 7
        if not data[at - 1] & 0x80:
            return value, at


def _thrift_ints(data: bytes, at: int, kind: int, path: tuple, out: dict) -> int:
    """Walk one value of thrift compact type `kind` at `at` (a footer is a struct, 12),
    noting where each integer lies by its field path; where the value ends."""
    if kind in (4, 5, 6):  # i16, i32, i64: a zigzag varint
        out[path] = at, _varint(data, at)[1]
        return out[path][1]
    if kind == 8:  # binary
        size, at = _varint(data, at)
        return at + size
    if kind in (9, 10):  # list, set: the count in the high nibble (15: a varint follows)
        count, inner, at = data[at] >> 4, data[at] & 15, at + 1
        if count == 15:
            count, at = _varint(data, at)
        for i in range(count):
            at = at + 1 if inner in (1, 2) else _thrift_ints(data, at, inner, (*path, i), out)
        return at
    if kind == 12:  # struct: field headers of (id delta, type) until a stop byte
        field = 0
        while data[at]:
            delta, inner, at = data[at] >> 4, data[at] & 15, at + 1
            assert delta, "a long field header: not written by pyarrow"
            field += delta
            at = _thrift_ints(data, at, inner, (*path, field), out) if inner > 2 else at
        return at + 1
    return at + {1: 0, 2: 0, 3: 1, 7: 8}[kind]  # bool, byte, double (no maps in a footer)


def _footer_patched(path: Path, ints: dict[tuple, int]) -> None:
    """`path` with the footer's integers at the field paths `ints` names set to their values
    (each kept one byte long): `(3,)` is the file's row count, `(4, G, 3)` row group G's."""
    data = bytearray(path.read_bytes())
    size = int.from_bytes(data[-8:-4], "little")
    where: dict[tuple, tuple[int, int]] = {}
    _thrift_ints(bytes(data[-8 - size : -8]), 0, 12, (), where)
    for field, value in ints.items():
        start, end = where[field]
        assert end - start == 1 and 0 <= value < 64  # one zigzag byte: the length stays
        data[len(data) - 8 - size + start] = value << 1
    path.write_bytes(bytes(data))


def test_a_footer_declaring_fewer_rows_than_its_pages_hold_is_refused(tmp_path: Path) -> None:
    """8 rows written, the footer patched to declare 4: pyarrow (and datasets) read 4 rows
    without a word, so 4 samples went missing; a file's count off its row groups' is named."""
    path = tmp_path / "train-0.parquet"
    _write(path, [0, 1, 2, 0, 1, 2, 0, 1], group=8)
    _footer_patched(path, {(3,): 4, (4, 0, 3): 4})
    assert pq.ParquetFile(path).read().num_rows == 4  # what pyarrow does with it
    with pytest.raises(ParquetFileError) as err:
        ParquetDataset("train", str(tmp_path))
    assert re.fullmatch(
        r".*/train-0\.parquet: row group 0 \(rows 0-3\): its footer declares 4 rows, but its "
        r"column chunk 'image\.bytes' holds 8 values, not 4: the footer is damaged .* Download "
        r"or write it again\. Or set dataset\.decode\.on_error=skip .*",
        str(err.value),
    )
    _write(path, [0, 1, 2, 0, 1, 2, 0, 1], group=8)
    _footer_patched(path, {(3,): 4})
    with pytest.raises(
        ParquetFileError, match=r"footer declares 4 rows but its row groups hold 8: the footer"
    ):
        ParquetDataset("train", str(tmp_path))
    multi = schema_for(NAMES, multi_label=True)
    _write(path, [[0], [], [2], [1, 2]], multi, group=4)  # a list column: 5 values, 4 rows
    assert len(ParquetDataset("train", str(tmp_path))) == 4
    _footer_patched(path, {(3,): 3, (4, 0, 3): 3})
    with pytest.raises(ParquetFileError, match=r"declares 3 rows, but its column chunk"):
        ParquetDataset("train", str(tmp_path))


def test_a_file_named_twice_in_train_files_is_refused_as_a_shard_named_twice_is(hub) -> None:
    """A glob and `data/../data/...` naming one file read it twice: 24 samples of 12."""
    root, _ = hub
    twice = ["data/train-*.parquet", "data/../data/train-00000-of-00002.parquet"]
    with pytest.raises(ValueError, match=r"dataset.train_files: file .*train-00000-of-00002\.parquet "
                       r"is named twice \(as .* and .*\).*list it once"):  # fmt: skip
        ParquetDataset("train", str(root), train_files=twice)


def test_a_link_beside_its_file_in_the_layout_and_an_empty_list_are_refused(hub) -> None:
    """With dataset.<split>_files null, a link to a train file was read twice without a word;
    an empty list named no file and gave an empty split."""
    root, _ = hub
    link = root / "data" / "train-00002-of-00002.parquet"
    link.symlink_to(root / "data" / "train-00000-of-00002.parquet")
    with pytest.raises(
        ValueError, match=r"dataset.root: file .*train-0000[02]-of-00002\.parquet is named twice"
    ):
        ParquetDataset("train", str(root))
    link.unlink()
    with pytest.raises(ValueError, match=r"dataset.train_files=\[\]: it names no file"):
        ParquetDataset("train", str(root), train_files=[])


TRAIN = ["data/train-00000-of-00002.parquet", "data/train-00001-of-00002.parquet"]
QUICK = {"retries": 0, "backoff": 0.0, "read_timeout": 1.0}  # a failure in about a second


def test_parquet_over_http_is_read_by_ranges_through_broken_connections(hub) -> None:
    """http(s) files are read as remote tar shards are: Range requests, a connection cut
    mid-body continued where it broke, a missing file or a glob one line naming the key."""
    root, images = hub
    faults = Faults(cut=300, drops=1, suffixes=(".parquet",))
    with serving(root, faults) as url:
        data = ParquetDataset("train", url, train_files=TRAIN, retries=1, backoff=0.0)
        got = [data[i][0] for i in range(len(data))]
        with pytest.raises(ParquetFileError, match=r"/data/nope\.parquet: HTTP 404 .*check the "
                           r"URL in dataset\.root / dataset\.<split>_files"):  # fmt: skip
            ParquetDataset("train", url, train_files=["data/nope.parquet"])
        with pytest.raises(ValueError, match=r"dataset\.train_files: 'data/\*\.parquet' is a "
                           r"glob, and a web server cannot be listed .*name each file"):  # fmt: skip
            ParquetDataset("train", url, train_files=["data/*.parquet"])
    assert all(torch.equal(got[i], decode_image_bytes(images[i], "x")) for i in range(12))
    assert any(r is not None and r != "bytes=0-" for _, r in faults.served(".parquet"))


@pytest.mark.parametrize(
    ("faults", "said"),
    [  # a server that sends 64 bytes a second; one whose bodies end before their Content-Length
        (Faults(drip=0.25, suffixes=(".parquet",)), r"fewer than 65,536 in dataset\.read_timeout"
         r"\); check the server, or raise dataset\.read_timeout"),
        (Faults(cut=300, drops=99, suffixes=(".parquet",)), r"IncompleteRead"),
        # down after the footer's read: the label column's is the one that fails
        (Faults(down=True, suffixes=(".parquet",)), r"HTTP Error 503"),
    ],
)  # fmt: skip
def test_a_dripping_or_cut_parquet_server_stops_in_one_line_naming_the_url(
    hub, faults: Faults, said: str
) -> None:
    """A drip left the start waiting without a word; a cut body gave aiohttp's raw
    ClientPayloadError, naming no URL (fsspec's http, which no read timeout bounded)."""
    root, _ = hub
    with serving(root, faults) as url:
        start = time.monotonic()
        with pytest.raises(ParquetFileError) as err:
            ParquetDataset("train", url, train_files=TRAIN[:1], **QUICK)
    message = str(err.value)
    assert time.monotonic() - start < 10 and "\n" not in message
    assert message.startswith(f"{url}/{TRAIN[0]}: network error at byte ")
    assert re.search(said, message)


def test_a_server_gone_down_mid_epoch_fails_a_row_group_once(hub) -> None:
    """A network failure is the row group's, as a damaged page is: its rows fail without
    asking the server again for each (it was asked once a row, each ask with its retries)."""
    root, _ = hub
    faults = Faults(suffixes=(".parquet",))
    with serving(root, faults) as url:
        data = ParquetDataset(
            "train", url, train_files=TRAIN[:1], decode=DecodePolicy(on_error="skip"), **QUICK
        )
        faults.down, before = True, len(faults.requests)
        bad = [data[i] for i in range(4)]  # row group 0
    assert [b.path for b in bad] == [f"{url}/{TRAIN[0]}#row={i}" for i in range(4)]
    assert "HTTP Error 503" in bad[3].error and len(faults.requests) == before + 1


def test_a_network_failure_names_the_servers_fix_not_the_files(hub) -> None:
    """A row unreadable because the server went down: the network's own fix, not "Fix or
    rewrite the file" (the attack's one Parquet finding)."""
    root, _ = hub
    faults = Faults(suffixes=(".parquet",))
    with serving(root, faults) as url:
        data = ParquetDataset("train", url, train_files=TRAIN[:1], **QUICK)
        faults.down = True
        with pytest.raises(SampleError) as failed:
            data[0]
    said = str(failed.value)
    assert "HTTP Error 503" in said and "rewrite" not in said
    assert said.endswith(
        "Or set dataset.decode.on_error=skip to leave unreadable rows out (listed in bad_samples.csv)."
    )


def test_an_image_that_does_not_decode_over_http_keeps_the_files_fix(tmp_path) -> None:
    """PIL's UnidentifiedImageError is an OSError too: served over http, the row's own fault
    still says to fix the file, not the server (the second attack)."""
    schema = schema_for(NAMES, multi_label=False)
    table = pa.table(
        {"image": [{"bytes": b"not an image at all" * 5, "path": "0.jpg"}], "label": [0]}
    )
    pq.write_table(table.cast(schema), tmp_path / "train-0.parquet")
    with serving(tmp_path, Faults(suffixes=(".parquet",))) as url:
        data = ParquetDataset("train", url, train_files=["train-0.parquet"], **QUICK)
        with pytest.raises(SampleError, match="Fix or rewrite the file, or set dataset"):
            data[0]
