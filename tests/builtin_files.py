"""Tiny CIFAR-10 and MNIST files in torchvision's real on-disk formats (for offline tests)."""

from __future__ import annotations

import pickle
import struct
from pathlib import Path

import numpy as np

CIFAR_NAMES = [
    "airplane",
    "automobile",
    "bird",
    "cat",
    "deer",
    "dog",
    "frog",
    "horse",
    "ship",
    "truck",
]


def write_cifar10(root: Path, per_batch: int = 8, seed: int = 0) -> dict[str, np.ndarray]:
    """`root/cifar-10-batches-py/` with 5 train batches, a test batch and batches.meta."""
    rng = np.random.default_rng(seed)
    folder = root / "cifar-10-batches-py"
    folder.mkdir(parents=True)
    written = {}
    for name in [f"data_batch_{i}" for i in range(1, 6)] + ["test_batch"]:
        data = rng.integers(0, 256, (per_batch, 3 * 32 * 32), dtype=np.uint8)
        labels = rng.integers(0, 10, per_batch).tolist()
        with open(folder / name, "wb") as f:
            pickle.dump({"data": data, "labels": labels, "batch_label": name}, f)
        written[name] = data
    with open(folder / "batches.meta", "wb") as f:
        pickle.dump({"label_names": CIFAR_NAMES, "num_cases_per_batch": per_batch}, f)
    return written


def _idx(path: Path, array: np.ndarray) -> None:
    magic = 2049 if array.ndim == 1 else 2051  # labels / images, unsigned bytes
    with open(path, "wb") as f:
        f.write(struct.pack(">I", magic) + b"".join(struct.pack(">I", n) for n in array.shape))
        f.write(array.astype(np.uint8).tobytes())


def write_mnist(root: Path, n: int = 12, seed: int = 0) -> np.ndarray:
    """`root/MNIST/raw/` with train and t10k idx files (uncompressed, as torchvision reads)."""
    rng = np.random.default_rng(seed)
    raw = root / "MNIST" / "raw"
    raw.mkdir(parents=True)
    images = rng.integers(0, 256, (n, 28, 28), dtype=np.uint8)
    for prefix in ("train", "t10k"):
        _idx(raw / f"{prefix}-images-idx3-ubyte", images)
        _idx(raw / f"{prefix}-labels-idx1-ubyte", np.arange(n) % 10)
    return images
