"""mode=cache as the project configures it: make cache, then train on it; its size from the
transforms. The store itself (pixels, resume, staleness, damage) is the engine's suite's
(engine/tests/test_image_cache.py)."""

from __future__ import annotations

import logging
import re
from pathlib import Path

import numpy as np
import pytest
import torch
from hydra.utils import instantiate
from omegaconf import OmegaConf

from engine.data.datasets.cache import CachedImages
from engine.data.datasets.imagefolder import ImageFolderDataset
from engine.modes.cache import cache
from engine.modes.cache_plan import side_from_transforms
from engine_dev.api import without_fold_keys

SIDE = 32  # demo images are 40-96 px: some JPEGs are >= 2x this (reduced decode), some not


@pytest.mark.parametrize("encoding", ["raw", "jpeg"])
def test_make_cache_then_train_with_random_crops(make_cfg, tmp_path: Path, encoding: str, caplog):
    out = tmp_path / "store"
    overrides = ("mode=cache", f"cache.dir={out}", f"cache.short_side={SIDE}")
    with caplog.at_level(logging.INFO, logger="engine.modes.cache"):
        metrics = cache(make_cfg(*overrides, f"cache.encoding={encoding}"))
    assert f"({encoding} encoding," in caplog.text
    assert ("lossy: every image is stored re-encoded as a JPEG of quality 90" in caplog.text) == (
        encoding == "jpeg"
    )
    assert metrics["cache/images"] == metrics["cache/written"] == 48 + 30
    assert metrics["cache/mb"] > 0  # the data file of this encoding was counted
    cfg = make_cfg("dataset=cache", f"dataset.root={out}", f"dataset.encoding={encoding}")
    pipelines = instantiate(cfg.transforms)
    node = without_fold_keys(cfg.dataset)  # the kind's own keys
    train = instantiate(node, split="train", transform=pipelines.train)
    val = instantiate(node, split="val", transform=pipelines.val, classes=train.classes)
    crops = [train[0][0] for _ in range(4)]
    assert all(c.dtype == torch.uint8 and c.shape == (3, 48, 48) for c in crops)
    assert any(not torch.equal(crops[0], c) for c in crops[1:])  # random crops still vary
    stored = instantiate(node, split="val", classes=train.classes)  # no transform
    assert len(val) == len(stored) == 30
    assert val[0][0].shape == (3, 48, 48) and torch.equal(val[0][0], pipelines.val(stored[0][0]))
    again = cache(make_cfg(*overrides, f"cache.encoding={encoding}"))
    assert again["cache/written"] == 0  # a finished cache is reused, not rebuilt
    assert np.array_equal(
        train.targets,
        ImageFolderDataset(str(Path(cfg.paths.demo_dir) / "imagefolder"), "train").targets,
    )


def test_a_null_short_side_takes_the_transforms_size_and_says_what_it_writes(
    make_cfg, tmp_path: Path, caplog
) -> None:
    out = tmp_path / "store"
    with caplog.at_level(logging.INFO, logger="engine.modes.cache_plan"):
        cache(make_cfg("mode=cache", f"cache.dir={out}", "cache.short_side=null"))
    plan = next(r.getMessage() for r in caplog.records if r.name == "engine.modes.cache_plan")
    # transforms=default: train RandomResizedCrop 48, val Resize [48, 48]; demo images 40-96 px
    assert re.fullmatch(
        r"cache: writing 78 images at short side 48 px \(transforms\.val's Resize\): "
        r"~0\.\d megapixels, ~\d\.\d MB on disk \(raw\)",
        plan,
    ), plan
    cached = CachedImages(str(out), "train")
    assert max(min(cached[i][0].shape[1:]) for i in range(len(cached))) == 48  # not 256
    size = (out / "train" / "pixels.u8").stat().st_size + (out / "val" / "pixels.u8").stat().st_size
    estimate = float(re.search(r"~(\d\.\d) MB", plan).group(1)) * 2**20
    assert 0.5 < estimate / size < 2  # the estimate is of the right size
    with pytest.raises(
        ValueError, match=r"neither transforms\.val nor transforms\.train .* set cache\.short_side"
    ):
        cache(make_cfg("mode=cache", f"cache.dir={tmp_path / 'none'}", "transforms=none"))


@pytest.mark.parametrize(
    ("transforms", "side", "source"),
    [
        ("default", 48, "transforms.val's Resize"),
        ("imagenet", 256, "transforms.val's Resize"),  # Resize 256, then CenterCrop 224
        ("mnist", 28, "transforms.train's RandomCrop"),  # val: [] (28 x 28 already)
    ],
)
def test_the_side_comes_from_the_largest_first_resize_or_crop(transforms, side, source) -> None:
    conf = Path(__file__).resolve().parents[1] / "conf" / "transforms" / f"{transforms}.yaml"
    assert side_from_transforms(instantiate(OmegaConf.load(conf))) == (side, source)
