"""The four dataset kinds read the demo formats and trace samples to files (CSV listing errors:
reliability/test_csv_checks.py)."""

from __future__ import annotations

import csv
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch
from torch.utils.data import DataLoader

from engine.data.collate import already_batched
from engine.data.datasets.csv import CsvDataset
from engine.data.datasets.imagefolder import ImageFolderDataset
from engine.data.datasets.tensor import TensorFileDataset
from engine_dev.demo import CLASSES


def test_imagefolder_classes_and_files(demo_dir: Path) -> None:
    train = ImageFolderDataset(str(demo_dir / "imagefolder"), "train")
    val = ImageFolderDataset(str(demo_dir / "imagefolder"), "val", classes=train.classes)
    assert train.classes == list(CLASSES)
    assert train.class_to_idx == {name: i for i, name in enumerate(CLASSES)}
    assert len(train) == 48 and len(val) == 30
    image, label = train[5]
    assert image.dtype == torch.uint8 and image.shape[0] == 3
    assert Path(train.get_filename(5)).parent.name == train.classes[label]
    assert train.targets.dtype == np.int64


def test_imagefolder_refuses_val_class_unknown_to_train(demo_dir: Path, tmp_path: Path) -> None:
    root = tmp_path / "tree"
    shutil.copytree(demo_dir / "imagefolder", root)
    (root / "val" / "hexagon").mkdir()
    with pytest.raises(ValueError, match="hexagon"):
        ImageFolderDataset(str(root), "val", classes=list(CLASSES))


def _write_csv(path: Path, header: list[str], rows: list[list[str]]) -> None:
    with open(path, "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(header)
        writer.writerows(rows)


def test_csv_relative_paths_custom_columns_and_integer_labels(demo_dir: Path, tmp_path: Path):
    listing = tmp_path / "lists" / "all.csv"
    listing.parent.mkdir()
    with open(demo_dir / "samples.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    _write_csv(
        listing,
        ["file", "y", "subset"],
        [[r["path"], str(CLASSES.index(r["label"])), r["split"]] for r in rows],
    )
    kwargs = dict(
        csv=str(listing),
        split_column="subset",
        path_column="file",
        label_column="y",
        root=str(demo_dir),
    )
    train = CsvDataset("train", **kwargs)
    val = CsvDataset("val", classes=train.classes, **kwargs)
    assert train.classes == ["0", "1", "2", "3", "4"]
    assert len(train) == 48 and len(val) == 30
    assert Path(train.get_filename(0)) == demo_dir / rows[0]["path"]
    assert train[0][1] == CLASSES.index(rows[0]["label"])


def test_csv_paths_default_to_the_csv_folder(demo_dir: Path) -> None:
    train = CsvDataset(
        "train", train_csv=str(demo_dir / "train.csv"), val_csv=str(demo_dir / "val.csv")
    )
    assert train.classes == list(CLASSES)
    assert Path(train.get_filename(0)).is_file()


def test_tensor_file_batches_are_slices(demo_dir: Path) -> None:
    path = str(demo_dir / "tensors" / "train.pt")
    data = TensorFileDataset("train", path, val_path=str(demo_dir / "tensors" / "val.pt"))
    assert data.classes == list(CLASSES)
    loader = DataLoader(data, batch_size=8, collate_fn=already_batched)
    inputs, labels = next(iter(loader))
    assert inputs.shape == (8, 3, 48, 48) and inputs.dtype == torch.uint8
    expected = torch.stack([data[i][0] for i in range(8)])
    assert torch.equal(inputs, expected)
    assert labels.tolist() == [data[i][1] for i in range(8)]


def test_tensor_npz_features_with_val_fraction(tmp_path: Path) -> None:
    features = np.random.default_rng(0).normal(size=(100, 12)).astype(np.float32)
    labels = np.arange(100) % 4
    np.savez(tmp_path / "f.npz", inputs=features, labels=labels)
    train = TensorFileDataset("train", str(tmp_path / "f.npz"), val_fraction=0.2)
    val = TensorFileDataset("val", str(tmp_path / "f.npz"), val_fraction=0.2, classes=train.classes)
    assert len(train) == 80 and len(val) == 20 and train.classes == ["0", "1", "2", "3"]
    seen = {tuple(x.tolist()) for x in train.inputs} | {tuple(x.tolist()) for x in val.inputs}
    assert len(seen) == 100  # disjoint and complete
    with pytest.raises(ValueError, match="transforms=none"):
        TensorFileDataset("train", str(tmp_path / "f.npz"), val_fraction=0.2, transform=lambda x: x)


def test_float64_features_become_float32(tmp_path: Path) -> None:
    np.savez(tmp_path / "f.npz", inputs=np.ones((10, 3)), labels=np.arange(10) % 2)  # float64
    data = TensorFileDataset("train", str(tmp_path / "f.npz"), val_fraction=0.2)
    assert data.inputs.dtype == torch.float32


def test_tensor_npz_keys_are_configurable_and_a_missing_one_lists_the_keys(tmp_path: Path):
    np.savez(tmp_path / "f.npz", x_train=np.ones((10, 3), np.float32), y=np.arange(10) % 2)
    data = TensorFileDataset(
        "train", str(tmp_path / "f.npz"), val_fraction=0.2, inputs_key="x_train", labels_key="y"
    )
    assert data.inputs.shape == (8, 3) and data.classes == ["0", "1"]
    with pytest.raises(ValueError, match=r"no array 'inputs' \(dataset.inputs_key\); the file "):
        TensorFileDataset("train", str(tmp_path / "f.npz"), val_fraction=0.2, labels_key="y")
    with pytest.raises(ValueError, match=r"the file has \['x_train', 'y'\]: set dataset.labels"):
        TensorFileDataset("train", str(tmp_path / "f.npz"), val_fraction=0.2, inputs_key="x_train")


def test_tensor_nhwc_images_are_detected_and_permuted_with_layout_nhwc(tmp_path: Path) -> None:
    nchw = torch.randint(0, 256, (6, 3, 48, 40), dtype=torch.uint8)
    nhwc = nchw.permute(0, 2, 3, 1).numpy()  # 6 x 48 x 40 x 3, as numpy and TF keep images
    np.savez(tmp_path / "img.npz", inputs=nhwc, labels=np.arange(6) % 2)
    path = str(tmp_path / "img.npz")
    with pytest.raises(ValueError, match=r"look like N,H,W,C .*: set dataset.layout=nhwc\.$"):
        TensorFileDataset("train", path, val_fraction=0.5)
    train = TensorFileDataset("train", path, val_fraction=0.5, layout="nhwc")
    val = TensorFileDataset("val", path, val_fraction=0.5, layout="nhwc", classes=train.classes)
    assert train.inputs.shape == (3, 3, 48, 40)
    got = {tuple(x.flatten().tolist()) for x in torch.cat([train.inputs, val.inputs])}
    assert got == {tuple(x.flatten().tolist()) for x in nchw}  # the same images, channels first
    np.savez(tmp_path / "feat.npz", inputs=np.ones((6, 5), np.float32), labels=np.arange(6) % 2)
    with pytest.raises(ValueError, match="layout=nhwc permutes images N x H x W x C"):
        TensorFileDataset("train", str(tmp_path / "feat.npz"), val_fraction=0.5, layout="nhwc")
    grey = torch.randint(0, 256, (4, 1, 28, 28), dtype=torch.uint8)  # N,1,28,28: channels first
    np.savez(tmp_path / "grey.npz", inputs=grey.numpy(), labels=np.arange(4) % 2)
    assert (
        TensorFileDataset("train", str(tmp_path / "grey.npz"), val_fraction=0.5).inputs.shape[1]
        == 1
    )
