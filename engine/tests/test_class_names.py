"""Class names as every dataset kind takes them (engine/data/listing.py): one name typed in
NFC and in NFD is one class, named in NFC, its files read as spelled; a control character, an
empty class list or (multi-label) a `|` in a name is refused as the list is built, in one line
naming where the name came from, the key and the fix; 100,000 classes build in linear time."""

from __future__ import annotations

import io
import re
import unicodedata
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from PIL import Image

from engine.data.datasets.csv import CsvDataset
from engine.data.datasets.imagefolder import ImageFolderDataset
from engine.data.datasets.mix import MixDataset
from engine.data.datasets.parquet import ParquetDataset
from engine.data.datasets.tar_shards import TarShardDataset
from engine.data.datasets.tensor import TensorFileDataset
from engine.data.listing import class_list, class_name, unique_classes
from engine.data.multi_hot import MultiLabelColumns
from engine_dev.hostile import tar_of

NFC = unicodedata.normalize("NFC", "café")  # é: one code point, as keyboards type it
NFD = unicodedata.normalize("NFD", "café")  # e and a combining accent, as macOS names files
assert NFC != NFD and len(NFD) == len(NFC) + 1


def _png() -> bytes:
    out = io.BytesIO()
    Image.new("RGB", (8, 8), (200, 30, 30)).save(out, "PNG")
    return out.getvalue()


def _csv(tmp_path: Path, rows: list[str], header: str = "path,label", **keys) -> CsvDataset:
    """The train split of tmp_path/list.csv (files not checked: only the labels matter)."""
    listing = tmp_path / "list.csv"
    listing.write_text("\n".join([header, *rows, ""]), encoding="utf-8")
    keys.setdefault("check_files", False)
    return CsvDataset("train", train_csv=str(listing), val_csv=str(listing), **keys)


def _parquet(tmp_path: Path, labels: list, kind: pa.DataType | None = None) -> Path:
    """tmp_path/pq/train.parquet: one PNG per label, labels of type `kind` (None: strings)."""
    schema = pa.schema([("image", pa.binary()), ("label", kind or pa.string())])
    path = tmp_path / "pq" / "train.parquet"
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.table({"image": [_png()] * len(labels), "label": labels}, schema), path)
    return path


def _folders(tmp_path: Path, names: list[str]) -> Path:
    """tmp_path/if/train/<name>/0.png for each name: an ImageFolder root."""
    for name in names:
        folder = tmp_path / "if" / "train" / name
        folder.mkdir(parents=True)
        (folder / "0.png").write_bytes(_png())
    return tmp_path / "if"


def _one_line(err: pytest.ExceptionInfo, *words: str) -> str:
    message = str(err.value)
    assert "\n" not in message and all(word in message for word in words), message
    return message


# 1. NFC and NFD


def test_csv_labels_in_nfc_and_nfd_are_one_class_and_paths_keep_their_spelling(tmp_path):
    image = tmp_path / f"{NFD}.png"  # a file named in NFD: opened as it is spelled
    image.write_bytes(_png())
    data = _csv(tmp_path, [f"{image.name},{NFC}", f"{NFC}.png,{NFD}"], check_files=False)
    assert data.classes == [NFC] and data.targets.tolist() == [0, 0]
    assert data.get_filename(0) == str(image) and data[0][0].shape == (3, 8, 8)
    multi = _csv(tmp_path, [f"a.png,{NFC}|{NFD}", f"b.png,{NFD}|x"], multi_label=True)
    assert multi.classes == [NFC, "x"] and multi.targets.tolist() == [[1, 0], [1, 1]]
    fixed = _csv(tmp_path, [f"a.png,{NFC}"], classes=[NFD, "x"])  # dataset.classes in NFD
    assert fixed.classes == [NFC, "x"] and fixed.targets.tolist() == [0]


def test_folders_named_in_nfc_and_nfd_are_one_class_each_read_as_spelled(tmp_path, caplog):
    root = _folders(tmp_path, [NFC, NFD, "x"])
    data = ImageFolderDataset(str(root), "train")
    assert data.classes == [NFC, "x"] and data.targets.tolist() == [0, 0, 1]
    spelled = sorted(Path(data.get_filename(i)).parent.name for i in range(2))
    assert spelled == sorted([NFC, NFD]) and all(data[i][0].shape == (3, 8, 8) for i in range(3))
    warned = [r.getMessage() for r in caplog.records if "one class" in r.getMessage()]
    assert len(warned) == 1 and ascii(NFC) in warned[0] and ascii(NFD) in warned[0]
    val = ImageFolderDataset(str(root), "train", classes=[NFD, "x"])  # the train's, in NFD
    assert val.classes == [NFC, "x"] and len(val) == 3


def test_parquet_and_tensor_names_in_nfc_and_nfd_are_one_class(tmp_path) -> None:
    _parquet(tmp_path, [NFC, NFD, "x"])
    data = ParquetDataset("train", str(tmp_path / "pq"), train_files="train.parquet")
    assert data.classes == [NFC, "x"] and data.targets.tolist() == [0, 0, 1]
    _parquet(tmp_path, [[NFD], [NFC, "x"]], pa.list_(pa.string()))
    multi = ParquetDataset("train", str(tmp_path / "pq"), train_files="train.parquet")
    assert multi.classes == [NFC, "x"] and multi.targets.tolist() == [[1, 0], [1, 1]]
    path = tmp_path / "t.npz"
    np.savez(path, inputs=np.zeros((2, 3), np.float32), labels=np.array([0, 1]), classes=[NFD, "x"])
    tensor = TensorFileDataset("train", str(path), val_fraction=0.5)
    assert tensor.classes == [NFC, "x"]
    val = TensorFileDataset("val", str(path), val_fraction=0.5, classes=tensor.classes)
    assert val.classes == [NFC, "x"]


def test_a_name_listed_in_both_spellings_is_refused_showing_both(tmp_path) -> None:
    with pytest.raises(ValueError) as err:
        _csv(tmp_path, [f"a.png,{NFC}"], classes=[NFC, "x", NFD])
    _one_line(err, "dataset.classes[2]:", "listed twice", ascii(NFC), ascii(NFD), "Unicode NFC")


def test_names_apart_only_in_spaces_at_their_ends_are_refused_showing_both(tmp_path) -> None:
    root = _folders(tmp_path, ["cat", "cat ", "x"])
    with pytest.raises(ValueError) as err:
        ImageFolderDataset(str(root), "train")
    _one_line(err, ascii("cat"), ascii("cat "), "spaces at their ends", "rename or merge")
    with pytest.raises(ValueError) as err:
        _csv(tmp_path, ["a.png,cat"], classes=["cat", " cat"])
    _one_line(err, "dataset.classes[1]:", "listed twice", ascii(" cat"), "spaces at their ends")


# 2. Control characters


@pytest.mark.parametrize(
    ("rows", "keys", "line", "code"),
    [
        (["a.png,cat", "b.png,c\0t"], {}, 3, "0000"),
        (["a.png,cat|d\tg"], {"multi_label": True}, 2, "0009"),
        (["a.png,cat\u2028dog"], {}, 2, "2028"),
        (["a.png,cat", "b.png,cat\u200b"], {}, 3, "200B"),  # zero-width space: prints as cat
        (["a.png,\u202etac"], {}, 2, "202E"),  # right-to-left override: prints as cat
        (["a.png,TAB", "b.png,\tTAB"], {}, 3, "0009"),  # at the edge: refused, not stripped
        (["a.png,cat|\tdog"], {"multi_label": True}, 2, "0009"),
    ],
)
def test_a_control_character_in_a_csv_label_names_the_line_and_key(
    tmp_path, rows, keys, line, code
) -> None:
    with pytest.raises(ValueError) as err:
        _csv(tmp_path, rows, **keys)
    where = f"{tmp_path / 'list.csv'}:{line}: column 'label' (dataset.label_column): class name"
    _one_line(err, where, f"U+{code}", "fix the row")


def test_a_label_with_a_carriage_return_is_refused_and_spaces_at_its_ends_still_go(tmp_path):
    with pytest.raises(ValueError) as err:
        _csv(tmp_path, ["a.png,CR", 'b.png,"\rCR"'])  # quoted: one field, as csv writes it
    _one_line(err, f"{tmp_path / 'list.csv'}:", "class name '\\rCR' holds", "U+000D")
    assert _csv(tmp_path, ["a.png,cat", "b.png, cat "]).classes == ["cat"]


def test_an_empty_name_in_a_given_class_list_is_refused_naming_the_item(tmp_path) -> None:
    with pytest.raises(ValueError) as err:
        _csv(tmp_path, ["a.png,cat"], classes=["cat", ""])
    _one_line(err, "dataset.classes[1]: an empty class name", "fix the name in dataset.classes")


def _shard_classes(tmp_path: Path, text: bytes) -> list[str]:
    """The classes of a two-sample tar shard (labels 0 and 1) with `text` as its classes file."""
    members = {"a.jpg": b"J", "a.cls": b"0", "b.jpg": b"J", "b.cls": b"1"}
    shard, names = tmp_path / "d.tar", tmp_path / "names.txt"
    shard.write_bytes(tar_of(members))
    names.write_bytes(text)
    return TarShardDataset("train", str(shard), str(shard), classes_file=str(names)).classes


def test_a_classes_file_is_checked_as_every_class_list_naming_its_line(tmp_path) -> None:
    names = tmp_path / "names.txt"
    listed = f"\ufeff{NFD}\r\n\n x \n".encode()  # a BOM, CRLF, a blank line, spaces at the ends
    assert _shard_classes(tmp_path, listed) == [NFC, "x"]
    with pytest.raises(ValueError) as err:
        _shard_classes(tmp_path, f"x\n{NFD}\n{NFC}\n".encode())
    _one_line(err, f"{names}:3:", "listed twice in dataset.classes_file", "Unicode NFC")
    for text, code in [(b"cat\nsqu\tare\n", "0009"), ("cat\ncat\u200b\n".encode(), "200B")]:
        with pytest.raises(ValueError) as err:
            _shard_classes(tmp_path, text)
        _one_line(err, f"{names}:2: class name", f"U+{code}", "dataset.classes_file")
    with pytest.raises(ValueError) as err:
        _shard_classes(tmp_path, b"\n  \n")
    _one_line(err, f"dataset.classes_file: {names} lists no class names", "set it to null")


def test_a_control_character_in_a_folder_parquet_label_or_given_list_is_refused(tmp_path):
    root = _folders(tmp_path, ["cat", "do\x01g"])
    with pytest.raises(ValueError) as err:
        ImageFolderDataset(str(root), "train")
    _one_line(err, f"{root / 'train'}/do\\x01g (a class folder under dataset.root)", "U+0001")
    assert "rename the folder" in str(err.value)
    path = _parquet(tmp_path, ["cat", "dog\0"])
    with pytest.raises(ValueError) as err:
        ParquetDataset("train", str(tmp_path / "pq"), train_files="train.parquet")
    _one_line(err, f"{path}: row 1, column 'label' (dataset.label_column)", "U+0000")
    with pytest.raises(ValueError) as err:
        _csv(tmp_path, ["a.png,cat"], classes=["cat", "dog\0"])
    _one_line(err, "dataset.classes[1]: class name 'dog\\x00'", "fix the name in dataset.classes")


# 3. An empty class list


def test_an_empty_class_list_is_refused_naming_dataset_classes_for_every_kind(tmp_path):
    message = r"^dataset\.classes=\[\]: no class names, so the model would have no outputs"
    root = _folders(tmp_path, ["cat"])
    npz = tmp_path / "t.npz"
    np.savez(npz, inputs=np.zeros((2, 3), np.float32), labels=np.array([0, 0]))
    _parquet(tmp_path, ["cat"])
    source = {"dataset": {"_target_": f"{ImageFolderDataset.__module__}.ImageFolderDataset"}}
    source["dataset"]["root"], source["weight"] = str(root), 1
    builds = [
        lambda: _csv(tmp_path, ["a.png,cat"], classes=[]),
        lambda: _csv(tmp_path, ["a.png,", "b.png,"], classes=[], multi_label=True),
        lambda: ImageFolderDataset(str(root), "train", classes=[]),
        lambda: TensorFileDataset("train", str(npz), val_fraction=0.5, classes=[]),
        lambda: ParquetDataset("train", str(tmp_path / "pq"), train_files="*.parquet", classes=[]),
        lambda: MixDataset("train", {"a": source}, classes=[]),
    ]
    for build in builds:
        with pytest.raises(ValueError, match=message) as err:
            build()
        _one_line(err, "list the classes", "leave them out (null)")


# 4. `|` in a multi-label class


def test_a_multi_label_class_holding_the_separator_is_refused_as_the_list_is_built(tmp_path):
    fix = ["holds '|'", "predictions.csv", "rename the class (e.g. 'a_b')"]
    with pytest.raises(ValueError) as err:
        _csv(tmp_path, ["x.png,c", "y.png,a|b;c"], multi_label=True, label_separator=";")
    _one_line(err, f"{tmp_path / 'list.csv'}:3: class 'a|b' (dataset.label_column) holds", *fix)
    with pytest.raises(ValueError) as err:
        _csv(tmp_path, ["x.png,c"], multi_label=True, classes=["c", "a|b"])
    _one_line(err, "dataset.classes[1]: class 'a|b'", *fix)
    with pytest.raises(ValueError) as err:
        _csv(tmp_path, ["x.png,1"], "path,a|b", multi_label=True, label_columns=["a|b"])
    _one_line(err, "dataset.label_columns[0]: class 'a|b'", *fix)
    path = _parquet(tmp_path, [["c"], ["c", "a|b"]], pa.list_(pa.string()))
    with pytest.raises(ValueError) as err:
        ParquetDataset("train", str(tmp_path / "pq"), train_files="train.parquet")
    _one_line(err, f"{path}: row 1: class 'a|b' (dataset.label_column) holds", *fix)
    # a single-label sample has one class: there `|` is an ordinary character
    assert _csv(tmp_path, ["x.png,a|b", "y.png,c"]).classes == ["a|b", "c"]


# 5. 100,000 classes


@pytest.mark.timeout(20)  # linear: ~0.1 s here; the scan of the names before each took ~36 s
def test_100000_classes_build_in_linear_time() -> None:
    names = [f"class_{i:06d}" for i in range(100_000)]
    assert unique_classes(names) == names  # a fixed list: the train split, then val's twice
    assert unique_classes(names, multi_label=True) == names
    assert class_list(names[::-1], str, "dataset.label_column", multi_label=True) == names
    columns = MultiLabelColumns(True, "label", "|", names)
    assert columns.column_classes == names
    with pytest.raises(ValueError, match=re.escape("(100,001 in all)")):  # a one-line message
        unique_classes([*names, "class_000007"])


def test_joiners_that_spell_words_are_kept() -> None:
    """ZWNJ and ZWJ part or join letters in Persian and Indic names: a format character a name
    may need, unlike the invisible ones that only make two names print alike."""
    persian = "\u0645\u06cc\u200c\u062e\u0648\u0627\u0647\u0645"  # "mi-khaham", with a ZWNJ
    assert class_name(persian, lambda: "x", "fix") == persian
    with pytest.raises(ValueError, match="U\\+200B"):
        class_name("cat\u200b", lambda: "x", "fix")
