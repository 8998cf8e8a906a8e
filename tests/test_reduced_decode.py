"""transforms=imagenet as conf/ sets it up decodes its val JPEGs at reduced scale, and
dataset.decode.reduced=false turns that off (the decode itself: the engine's suite,
engine/tests/test_reduced_decode.py)."""

from __future__ import annotations

from hydra.utils import instantiate

from engine.data.datasets.imagefolder import ImageFolderDataset
from engine.data.decode_policy import DecodePolicy
from engine.data.folds import without_fold_keys
from engine.data.transforms import decode_min_side


def test_decode_min_side_reads_the_first_resize_of_the_imagenet_pipelines(make_cfg) -> None:
    imagenet = instantiate(make_cfg("transforms=imagenet").transforms)
    assert decode_min_side(imagenet.val) == 256  # Resize 256 first
    assert decode_min_side(imagenet.train) is None  # a random crop needs every pixel


def test_datasets_decode_reduced_only_when_enabled(demo_dir, make_cfg) -> None:
    val = instantiate(make_cfg("transforms=imagenet").transforms).val
    root = str(demo_dir / "imagefolder")
    assert ImageFolderDataset(root, "val", transform=val).decode_min_side == 256
    off = ImageFolderDataset(root, "val", transform=val, decode=DecodePolicy(reduced=False))
    assert off.decode_min_side is None
    cfg = make_cfg("transforms=imagenet", "dataset.decode.reduced=false")
    node = without_fold_keys(cfg.dataset)  # the kind's own keys
    assert instantiate(node, split="val", transform=val).decode_min_side is None
