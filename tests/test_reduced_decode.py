"""transforms=imagenet as conf/ sets it up decodes its val JPEGs at reduced scale (its first
step is Resize 256) and its train JPEGs in full (a random crop first), and
dataset.decode.reduced=false turns that off (the decode itself: the engine's suite)."""

from __future__ import annotations

from hydra.utils import instantiate
from omegaconf import DictConfig

from engine_dev.api import without_fold_keys


def _dataset(cfg: DictConfig, split: str = "val"):
    """The configured dataset kind's `split`, with its transforms.<split> pipeline."""
    pipeline = getattr(instantiate(cfg.transforms), split)
    return instantiate(without_fold_keys(cfg.dataset), split=split, transform=pipeline)


def test_imagenet_val_decodes_at_its_resize_and_train_in_full(make_cfg) -> None:
    cfg = make_cfg("transforms=imagenet")
    assert _dataset(cfg).decode_min_side == 256  # Resize 256 first
    assert _dataset(cfg, "train").decode_min_side is None  # a random crop needs every pixel


def test_dataset_decode_reduced_false_decodes_in_full(make_cfg) -> None:
    cfg = make_cfg("transforms=imagenet", "dataset.decode.reduced=false")
    assert _dataset(cfg).decode_min_side is None
