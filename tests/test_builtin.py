"""torchvision built-in datasets, offline: tiny files in the real on-disk formats."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from torchvision.datasets import cifar

from engine.data.datasets.builtin import TorchvisionBuiltin
from engine_dev.api import load_checkpoint
from src.loop import train
from tests.builtin_files import CIFAR_NAMES, write_cifar10, write_mnist


@pytest.fixture
def cifar_root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, dict]:
    """Tiny CIFAR-10 files; torchvision's md5 check (of the official files) becomes a presence
    check, everything else (pickle batches, meta, reshaping) is torchvision's real code."""
    written = write_cifar10(tmp_path)
    monkeypatch.setattr(cifar, "check_integrity", lambda path, md5=None: Path(path).is_file())
    return tmp_path, written


def test_cifar10_reads_the_python_batches(cifar_root) -> None:
    root, written = cifar_root
    train_set = TorchvisionBuiltin("train", "cifar10", str(root), download=False)
    val_set = TorchvisionBuiltin("val", "cifar10", str(root), download=False)
    assert train_set.classes == CIFAR_NAMES and len(train_set) == 40 and len(val_set) == 8
    image, _ = val_set[3]
    assert image.dtype == torch.uint8 and image.shape == (3, 32, 32)
    assert np.array_equal(image.numpy().reshape(-1), written["test_batch"][3])


def test_mnist_reads_the_idx_files(tmp_path: Path) -> None:
    images = write_mnist(tmp_path)
    data = TorchvisionBuiltin("train", "mnist", str(tmp_path), download=False)
    image, label = data[5]
    assert image.shape == (1, 28, 28) and label == 5 and data.classes[5].startswith("5")
    assert torch.equal(image[0], torch.from_numpy(images[5]))


def test_missing_files_say_how_to_get_them(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match=r"dataset\.root=.*dataset\.download=true"):
        TorchvisionBuiltin("train", "fashion_mnist", str(tmp_path), download=False)


def test_cifar10_recipe_runs_a_few_batches(make_cfg, cifar_root) -> None:
    root, _ = cifar_root
    cfg = make_cfg(
        "experiment=cifar10_resnet18",
        "debug=fast",
        f"paths.data_dir={root}",
        "loader.batch_size=8",
        "trainer.limit_train_batches=2",
    )
    assert train(cfg)["epochs"] == 1


def test_mnist_experiment_takes_one_channel_from_the_data(make_cfg, tmp_path: Path) -> None:
    write_mnist(tmp_path)
    cfg = make_cfg(
        "experiment=mnist_small_cnn",
        "debug=fast",
        f"paths.data_dir={tmp_path}",
        "loader.batch_size=4",
    )
    assert train(cfg)["epochs"] == 1
    weights = load_checkpoint(Path(cfg.paths.output_dir) / "checkpoints" / "last.pt")["model"]
    assert weights["features.0.0.weight"].shape[1] == 1  # the first conv takes one channel
