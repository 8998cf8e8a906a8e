"""CSV listings are checked up front; each problem names the CSV file and its line."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from src.data.datasets.csv_table import CsvDataset

GOOD = "imagefolder/train/circle/circle_00000.jpg"
OTHER = "imagefolder/train/cross/cross_00000.jpg"


def _listing(demo_dir: Path, tmp_path: Path, rows: list[str], newline: str = "\n") -> Path:
    """tmp_path/root/list.csv with `rows`; root/imagefolder links to the demo images."""
    root = tmp_path / "root"
    root.mkdir(exist_ok=True)
    link = root / "imagefolder"
    if not link.exists():
        link.symlink_to(demo_dir / "imagefolder", target_is_directory=True)
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
)  # fmt: skip
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


def test_crlf_and_bom_just_work_and_lines_stay_right(demo_dir, tmp_path) -> None:
    listing = _listing(demo_dir, tmp_path, [f"{GOOD},circle", f"{OTHER},cross"], newline="\r\n")
    listing.write_bytes(b"\xef\xbb\xbf" + listing.read_bytes())  # a BOM, as Excel writes it
    data = _load(listing)
    assert data.classes == ["circle", "cross"] and len(data) == 2
    assert data.get_filename(1).endswith("cross_00000.jpg") and data[1][1] == 1
    broken = _listing(demo_dir, tmp_path, [f"{GOOD},circle", f"{OTHER},"], newline="\r\n")
    with pytest.raises(ValueError, match=r"list\.csv:3: empty 'label'"):
        _load(broken)
