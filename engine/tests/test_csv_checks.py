"""CSV listings are checked up front; each problem names the CSV file and its line."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from engine.data.datasets.csv import CsvDataset

GOOD = "imagefolder/train/circle/circle_00000.jpg"
OTHER = "imagefolder/train/cross/cross_00000.jpg"


def _listing(demo_dir: Path, tmp_path: Path, rows: list[str], newline: str = "\n") -> Path:
    """tmp_path/root/list.csv with `rows`; root/imagefolder is a copy of the demo images."""
    root = tmp_path / "root"
    if not (root / "imagefolder").exists():
        shutil.copytree(demo_dir / "imagefolder", root / "imagefolder")
    path = root / "list.csv"
    path.write_bytes(newline.join(["path,label", *rows, ""]).encode())
    return path


def _load(listing: Path) -> CsvDataset:
    return CsvDataset("train", train_csv=str(listing), val_csv=str(listing))


@pytest.mark.parametrize(
    ("rows", "message"),
    [
        ([f"{GOOD},circle", "imagefolder/nope.jpg,circle"], r":3: .*nope\.jpg does not exist"),
        ([f"{GOOD},circle", f"{OTHER},"], r":3: empty 'label'"),
        ([f"{GOOD},circle", ",circle"], r":3: empty 'path'"),
        ([f"{GOOD},circle", f"{OTHER},cross", f"{GOOD},circle"], r":4: .* twice .*lines 2 and 4"),
        ([f"{GOOD},circle", f"./{GOOD},circle"], r":3: .* twice .*lines 2 and 3"),
    ],
)
def test_listing_errors_name_the_line(demo_dir, tmp_path, rows, message) -> None:
    listing = _listing(demo_dir, tmp_path, rows)
    with pytest.raises((ValueError, FileNotFoundError), match=re.escape(str(listing)) + message):
        _load(listing)


@pytest.mark.parametrize(
    "outside",
    ["../../etc/passwd", "imagefolder/../../elsewhere.jpg", "/etc/passwd", "~/photo.jpg"],
)
def test_paths_leaving_the_root_are_refused_not_followed(demo_dir, tmp_path, outside) -> None:
    listing = _listing(demo_dir, tmp_path, [f"{GOOD},circle", f"{outside},circle"])
    pattern = re.escape(f"{listing}:3: {outside!r}") + r".*outside the dataset root.*dataset\.root"
    with pytest.raises(ValueError, match=pattern):
        _load(listing)


def test_unknown_val_label_names_the_line(demo_dir, tmp_path) -> None:
    listing = _listing(demo_dir, tmp_path, [f"{GOOD},circle", f"{OTHER},hexagon"])
    with pytest.raises(ValueError, match=r"list\.csv:3: label 'hexagon' is not a train class"):
        CsvDataset("val", train_csv=str(listing), val_csv=str(listing), classes=["circle"])


def test_missing_column_lists_the_columns_found(demo_dir, tmp_path) -> None:
    listing = _listing(demo_dir, tmp_path, [f"{GOOD},circle"])
    with pytest.raises(ValueError, match=r"list\.csv:1: no column 'file'.*\['path', 'label'\]"):
        CsvDataset("train", train_csv=str(listing), val_csv=str(listing), path_column="file")


def test_a_column_read_twice_in_the_header_is_refused(demo_dir, tmp_path) -> None:
    listing = _listing(demo_dir, tmp_path, [])
    listing.write_text(f"path,path,label,note,note\n{GOOD},{OTHER},circle,a,b\n")
    pattern = r"list\.csv:1: column 'path' \(dataset\.path_column\) is in the header 2 times"
    with pytest.raises(ValueError, match=pattern + r" \(columns 1, 2\); rename or remove"):
        _load(listing)
    listing.write_text(f"path,label,note,note\n{GOOD},circle,a,b\n")  # not read: no matter
    assert _load(listing).classes == ["circle"]


def test_crlf_and_bom_just_work_and_lines_stay_right(demo_dir, tmp_path) -> None:
    listing = _listing(demo_dir, tmp_path, [f"{GOOD},circle", f"{OTHER},cross"], newline="\r\n")
    listing.write_bytes(b"\xef\xbb\xbf" + listing.read_bytes())  # a BOM, as Excel writes it
    data = _load(listing)
    assert data.classes == ["circle", "cross"] and len(data) == 2
    assert data.get_filename(1).endswith("cross_00000.jpg") and data[1][1] == 1
    broken = _listing(demo_dir, tmp_path, [f"{GOOD},circle", f"{OTHER},"], newline="\r\n")
    with pytest.raises(ValueError, match=r"list\.csv:3: empty 'label'"):
        _load(broken)


def test_a_symlink_out_of_the_root_is_refused_naming_the_line(demo_dir, tmp_path) -> None:
    listing = _listing(demo_dir, tmp_path, [f"{GOOD},circle", "escape/etc/passwd,circle"])
    (listing.parent / "escape").symlink_to("/", target_is_directory=True)
    with pytest.raises(ValueError, match=r"list\.csv:3: 'escape/etc/passwd'.*through a symlink"):
        _load(listing)
    linked = _listing(demo_dir, tmp_path, [f"{GOOD},circle", "passwd.jpg,circle"])
    (linked.parent / "passwd.jpg").symlink_to("/etc/passwd")  # a linked file, not a folder
    with pytest.raises(ValueError, match=r"list\.csv:3: 'passwd\.jpg'.*through a symlink"):
        _load(linked)


def test_another_encoding_names_the_line_and_the_key_that_reads_it(demo_dir, tmp_path):
    listing = _listing(demo_dir, tmp_path, [f"{GOOD},circle", f"{OTHER},croix"])
    listing.write_bytes(listing.read_bytes().replace(b"croix", "crôix".encode("latin-1")))
    with pytest.raises(ValueError, match=r"list\.csv:3: not valid utf-8.*dataset\.csv_encoding"):
        _load(listing)
    data = CsvDataset("train", train_csv=str(listing), val_csv=str(listing), csv_encoding="latin-1")
    assert data.classes == ["circle", "crôix"]


@pytest.mark.parametrize(
    ("row", "message"),
    [
        ("a" * 200_000 + ",circle", r":3: field larger than field limit"),
        (f"{OTHER},cross,stray", r":3: 3 fields, the header has 2; quote fields"),
        (f'"{OTHER},cross', r":3: unexpected end of data; check the quoting of that row"),
        (f"{OTHER}\0,cross", r":3: .*NUL byte"),
    ],
)
def test_malformed_rows_name_the_line(demo_dir, tmp_path, row, message) -> None:
    listing = _listing(demo_dir, tmp_path, [f"{GOOD},circle", row])
    with pytest.raises(ValueError, match=re.escape(str(listing)) + message):
        _load(listing)


def test_integer_labels_only_digits_and_no_mostly_empty_ids(demo_dir, tmp_path, caplog) -> None:
    superscript = _listing(demo_dir, tmp_path, [f"{GOOD},circle", f"{OTHER},²"])
    assert _load(superscript).classes == ["circle", "²"]  # among names: a name, not a crash
    files = sorted((tmp_path / "root" / "imagefolder" / "train").glob("*/*.jpg"))[:6]
    paths = [str(p.relative_to(tmp_path / "root")) for p in files]
    sparse = _listing(
        demo_dir, tmp_path, [f"{p},{y}" for p, y in zip(paths, [0, 1, 99] * 2, strict=False)]
    )
    with pytest.raises(ValueError, match=r":4: integer label 99 makes 100 classes.*0, 1, 99"):
        _load(sparse)
    gap = _listing(
        demo_dir, tmp_path, [f"{p},{y}" for p, y in zip(paths, [0, 1, 3] * 2, strict=False)]
    )
    assert len(_load(gap).classes) == 4
    assert "1 ids have no samples (e.g. [2])" in caplog.text


@pytest.mark.parametrize("odd", ["1.0", "²", "０", "+3", "cat"])
def test_one_label_that_is_not_an_integer_among_integers_is_refused(
    demo_dir, tmp_path, odd
) -> None:
    _listing(demo_dir, tmp_path, [])  # copies the images
    files = sorted((tmp_path / "root" / "imagefolder" / "train").glob("*/*.jpg"))[:12]
    paths = [str(p.relative_to(tmp_path / "root")) for p in files]
    labels = [*map(str, range(11)), odd]  # 0..10: as names, '10' would sort before '2'
    listing = _listing(demo_dir, tmp_path, [f"{p},{y}" for p, y in zip(paths, labels, strict=True)])
    pattern = (
        re.escape(f"{listing}:13: label {odd!r} (column 'label', dataset.label_column) is not a ")
        + r"plain integer.*but label '0' at "
        + re.escape(f"{listing}:2 is")
        + r".*every label as an integer, or every label as a name"
    )
    with pytest.raises(ValueError, match=pattern):
        _load(listing)
