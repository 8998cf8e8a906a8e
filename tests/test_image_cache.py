"""mode=cache: the same pixels as decoding and resizing the source, resumable, never stale."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch
from hydra.utils import instantiate

from src.data.datasets.cached import CachedImages
from src.data.datasets.imagefolder import ImageFolderDataset
from src.data.decode import SampleError, read_image
from src.data.image_cache import StaleCacheError
from src.modes.cache import CacheSettings, cache, shrink, write_split

SIDE = 32  # demo images are 40-96 px: some JPEGs are >= 2x this (reduced decode), some not


def _settings(**changes: object) -> CacheSettings:
    values = {"dir": "unused", "short_side": SIDE, "rebuild": False, "commit_every": 4}
    return CacheSettings(**{**values, **changes})  # type: ignore[arg-type]


@pytest.fixture
def images(demo_dir: Path, tmp_path: Path) -> Path:
    """A private copy of the demo ImageFolder (tests change files in it)."""
    return Path(shutil.copytree(demo_dir / "imagefolder", tmp_path / "images"))


def _store(folder: Path) -> tuple[bytes, bytes]:
    return (folder / "pixels.u8").read_bytes(), (folder / "index.i64").read_bytes()


def test_cached_pixels_match_decoding_and_resizing_the_source(images: Path, tmp_path: Path):
    files = ImageFolderDataset(str(images), "train")
    write_split(files, tmp_path / "cache" / "train", _settings(), workers=0, context=None)
    cached = CachedImages(str(tmp_path / "cache"), "train")
    assert len(cached) == len(files) and cached.classes == files.classes
    reduced = 0
    for i in range(len(files)):
        image, label = cached[i]
        source = read_image(files.get_filename(i))  # full decode
        expected = shrink(source, SIDE)
        assert label == files.targets[i] and cached.get_filename(i) == files.get_filename(i)
        assert image.dtype == torch.uint8 and image.shape == expected.shape
        diff = (image.int() - expected.int()).abs().float()
        if files.get_filename(i).endswith(".jpg") and min(source.shape[1:]) >= 2 * SIDE:
            reduced += 1  # decoded at 1/2 scale: tiny noisy shapes differ most at their edges
            assert diff.mean() < 3.0 and diff.flatten().quantile(0.99) < 50
        else:
            assert diff.max() == 0
    assert 0 < reduced < len(files)  # both paths were checked


def test_an_interrupted_build_resumes_to_the_same_store(images: Path, tmp_path: Path) -> None:
    files = ImageFolderDataset(str(images), "train")
    victim = Path(files.get_filename(21))
    good = victim.read_bytes()
    victim.write_bytes(b"not an image")  # the build stops here, like a crash mid-way
    folder = tmp_path / "resumed" / "train"
    with pytest.raises(SampleError, match=victim.name):
        write_split(files, folder, _settings(), workers=0, context=None)
    done = json.loads((folder / "progress.json").read_text())["done"]
    assert 0 < done <= 21  # the images read before the failing one were committed
    with open(folder / "pixels.u8", "ab") as f:
        f.write(b"\x07" * 1000)  # bytes of a half-written image after the last commit
    victim.write_bytes(good)
    written = write_split(files, folder, _settings(), workers=0, context=None)
    assert written == len(files) - done  # only the rest was decoded again
    fresh = tmp_path / "fresh" / "train"
    write_split(files, fresh, _settings(), workers=0, context=None)
    assert _store(folder) == _store(fresh)


def test_a_changed_source_is_refused_naming_the_file_and_the_fix(images: Path, tmp_path: Path):
    files = ImageFolderDataset(str(images), "train")
    folder = tmp_path / "cache" / "train"
    write_split(files, folder, _settings(), workers=0, context=None)
    changed = Path(files.get_filename(5))
    shutil.copyfile(files.get_filename(6), changed)  # other bytes under the same name
    with pytest.raises(StaleCacheError, match=rf"{changed}.*cache\.rebuild=true.*check_sources"):
        CachedImages(str(tmp_path / "cache"), "train")
    with pytest.raises(
        StaleCacheError, match=rf"stale.*{changed}.*Not mixing.*cache\.rebuild=true"
    ):
        write_split(files, folder, _settings(), workers=0, context=None)
    assert len(CachedImages(str(tmp_path / "cache"), "train", check_sources=False)) == len(files)
    write_split(files, folder, _settings(rebuild=True), workers=0, context=None)
    assert len(CachedImages(str(tmp_path / "cache"), "train")) == len(files)


def test_other_settings_or_an_unfinished_cache_are_refused(images: Path, tmp_path: Path):
    files = ImageFolderDataset(str(images), "train")
    folder = tmp_path / "cache" / "train"
    victim = Path(files.get_filename(9))
    good = victim.read_bytes()
    victim.write_bytes(b"")
    with pytest.raises(SampleError):
        write_split(files, folder, _settings(), workers=0, context=None)
    with pytest.raises(StaleCacheError, match=r"unfinished \(\d of 48 images\).*make cache"):
        CachedImages(str(tmp_path / "cache"), "train")
    victim.write_bytes(good)
    with pytest.raises(StaleCacheError, match=r"short_side.*24.*cache\.rebuild=true.*cache\.dir"):
        write_split(files, folder, _settings(short_side=24), workers=0, context=None)


def test_make_cache_then_train_with_random_crops(make_cfg, tmp_path: Path) -> None:
    out = tmp_path / "store"
    metrics = cache(make_cfg("mode=cache", f"cache.dir={out}", f"cache.short_side={SIDE}"))
    assert metrics["cache/images"] == metrics["cache/written"] == 48 + 30
    cfg = make_cfg("dataset=cache", f"dataset.root={out}")
    pipelines = instantiate(cfg.transforms)
    train = instantiate(cfg.dataset, split="train", transform=pipelines.train)
    val = instantiate(cfg.dataset, split="val", transform=pipelines.val, classes=train.classes)
    crops = [train[0][0] for _ in range(4)]
    assert all(c.dtype == torch.uint8 and c.shape == (3, 48, 48) for c in crops)
    assert any(not torch.equal(crops[0], c) for c in crops[1:])  # random crops still vary
    assert torch.equal(val[0][0], val[0][0]) and len(val) == 30
    again = cache(make_cfg("mode=cache", f"cache.dir={out}", f"cache.short_side={SIDE}"))
    assert again["cache/written"] == 0  # a finished cache is reused, not rebuilt
    assert np.array_equal(
        train.targets,
        ImageFolderDataset(str(Path(cfg.paths.demo_dir) / "imagefolder"), "train").targets,
    )
