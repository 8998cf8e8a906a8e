"""mode=cache's store: the same pixels as decoding and resizing the source, resumable, never
stale."""

from __future__ import annotations

import json
import re
import shutil
import struct
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image
from torchcodec.decoders import decode_jpeg
from torchcodec.encoders import JpegEncoder

from engine.data.bad_samples import BadSample
from engine.data.cache_store import StaleCacheError
from engine.data.datasets.cache import CachedImages
from engine.data.datasets.imagefolder import ImageFolderDataset
from engine.data.decode import SampleError, read_image
from engine.data.decode_policy import DecodePolicy
from engine.modes.cache import CacheSettings, shrink, write_split

SIDE = 32  # demo images are 40-96 px: some JPEGs are >= 2x this (reduced decode), some not


HUGE = 65500  # the side a lying header declares


def _settings(**changes: object) -> CacheSettings:
    values = {
        "dir": "unused",
        "short_side": SIDE,
        "rebuild": False,
        "commit_every": 4,
        "encoding": "raw",
        "jpeg_quality": 90,
    }
    return CacheSettings(**{**values, **changes})  # type: ignore[arg-type]


@pytest.fixture
def images(demo_dir: Path, tmp_path: Path) -> Path:
    """A private copy of the demo ImageFolder (tests change files in it)."""
    return Path(shutil.copytree(demo_dir / "imagefolder", tmp_path / "images"))


def _store(folder: Path, data: str = "pixels.u8") -> tuple[bytes, bytes]:
    return (folder / data).read_bytes(), (folder / "index.i64").read_bytes()


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


@pytest.mark.parametrize(("encoding", "data"), [("raw", "pixels.u8"), ("jpeg", "jpegs.bin")])
def test_an_interrupted_build_resumes_to_the_same_store(
    images: Path, tmp_path: Path, encoding: str, data: str
) -> None:
    settings = _settings(encoding=encoding)
    files = ImageFolderDataset(str(images), "train")
    victim = Path(files.get_filename(21))
    good = victim.read_bytes()
    victim.write_bytes(b"not an image")  # the build stops here, like a crash mid-way
    folder = tmp_path / "resumed" / "train"
    with pytest.raises(SampleError, match=victim.name):
        write_split(files, folder, settings, workers=0, context=None)
    done = json.loads((folder / "progress.json").read_text())["done"]
    assert 0 < done <= 21  # the images read before the failing one were committed
    with open(folder / data, "ab") as f:
        f.write(b"\x07" * 1000)  # bytes of a half-written image after the last commit
    victim.write_bytes(good)
    written = write_split(files, folder, settings, workers=0, context=None)
    assert written == len(files) - done  # only the rest was decoded again
    fresh = tmp_path / "fresh" / "train"
    write_split(files, fresh, settings, workers=0, context=None)
    assert _store(folder, data) == _store(fresh, data)


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


def _jpeg_and_raw(
    files: ImageFolderDataset, root: Path, quality: int = 90
) -> tuple[CachedImages, CachedImages]:
    for encoding in ("jpeg", "raw"):
        settings = _settings(encoding=encoding, jpeg_quality=quality)
        write_split(files, root / encoding / "train", settings, workers=0, context=None)
    return CachedImages(str(root / "jpeg"), "train"), CachedImages(str(root / "raw"), "train")


def test_jpeg_cache_returns_what_was_encoded_close_to_raw(images: Path, tmp_path: Path):
    files = ImageFolderDataset(str(images), "train")
    jpeg, raw = _jpeg_and_raw(files, tmp_path, quality=90)
    assert len(jpeg) == len(raw) == len(files) and np.array_equal(jpeg.targets, raw.targets)
    diffs = []
    for i in range(len(raw)):
        (image, label), (pixels, raw_label) = jpeg[i], raw[i]
        expected = decode_jpeg(JpegEncoder(pixels).to_tensor(quality=90))
        assert image.dtype == torch.uint8 and label == raw_label
        assert torch.equal(image, expected)  # the reader returns exactly what was written
        diffs.append((image.int() - pixels.int()).abs().float().mean().item())
    # demo images are tiny noisy shapes (JPEG's worst case): mean 3.4, worst image 5.9 at q90
    assert np.mean(diffs) < 4 and max(diffs) < 8
    jpeg_bytes = (tmp_path / "jpeg" / "train" / "jpegs.bin").stat().st_size
    assert jpeg_bytes < (tmp_path / "raw" / "train" / "pixels.u8").stat().st_size / 2


def test_png_sources_go_through_the_jpeg_cache(images: Path, tmp_path: Path) -> None:
    rgba = np.random.default_rng(0).integers(0, 256, (70, 50, 4), dtype=np.uint8)
    Image.fromarray(rgba, "RGBA").save(images / "train" / "circle" / "zz_rgba.png")
    files = ImageFolderDataset(str(images), "train")
    pngs = [i for i in range(len(files)) if files.get_filename(i).endswith(".png")]
    assert len(pngs) > 1 and any(files.get_filename(i).endswith("_rgba.png") for i in pngs)
    jpeg, raw = _jpeg_and_raw(files, tmp_path)
    data = (tmp_path / "jpeg" / "train" / "jpegs.bin").read_bytes()
    for i in pngs:
        offset, nbytes, height, width, _ = (int(v) for v in jpeg.index[i])
        entry = data[offset : offset + nbytes]
        assert entry[:2] == b"\xff\xd8" and entry[-2:] == b"\xff\xd9"  # a whole JPEG file
        expected = decode_jpeg(JpegEncoder(raw[i][0]).to_tensor(quality=90))
        assert jpeg[i][0].shape == (3, height, width) and torch.equal(jpeg[i][0], expected)


def test_other_encoding_or_quality_is_refused_on_resume_and_read(images: Path, tmp_path: Path):
    files = ImageFolderDataset(str(images), "train")
    folder = tmp_path / "cache" / "train"
    write_split(files, folder, _settings(encoding="jpeg"), workers=0, context=None)
    for change, key in (({"encoding": "raw"}, "encoding"), ({"jpeg_quality": 80}, "jpeg_quality")):
        with pytest.raises(
            StaleCacheError, match=rf"differs in [^:]*cache\.{key}\b.*cache\.rebuild"
        ):
            write_split(
                files, folder, _settings(**{"encoding": "jpeg", **change}), workers=0, context=None
            )
    with pytest.raises(
        StaleCacheError, match=r"cache\.encoding='jpeg', not dataset\.encoding='raw'"
    ):
        CachedImages(str(tmp_path / "cache"), "train", encoding="raw")
    with pytest.raises(StaleCacheError, match=r"jpeg_quality=90, not dataset\.jpeg_quality=80"):
        CachedImages(str(tmp_path / "cache"), "train", jpeg_quality=80)
    assert len(CachedImages(str(tmp_path / "cache"), "train", "jpeg", jpeg_quality=90)) == 48


def test_a_cache_of_the_older_format_is_refused(images: Path, tmp_path: Path) -> None:
    files = ImageFolderDataset(str(images), "train")
    folder = tmp_path / "cache" / "train"
    write_split(files, folder, _settings(), workers=0, context=None)
    manifest = json.loads((folder / "manifest.json").read_text())
    (folder / "manifest.json").write_text(json.dumps({**manifest, "format": 1}))
    with pytest.raises(StaleCacheError, match=r"format 1, this version reads format 2.*rebuild"):
        CachedImages(str(tmp_path / "cache"), "train")
    with pytest.raises(StaleCacheError, match=r"format 1, this version reads format 2.*rebuild"):
        write_split(files, folder, _settings(), workers=0, context=None)


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("encoding", "png"),
        ("encoding", None),
        ("jpeg_quality", 0),
        ("jpeg_quality", 101),
        ("jpeg_quality", "90"),
    ],
)
def test_bad_encoding_or_jpeg_quality_is_refused_naming_the_key(key: str, value: object):
    allowed = "one of raw, jpeg" if key == "encoding" else "an int from 1 to 100"
    with pytest.raises(ValueError, match=re.escape(f"cache.{key}={value!r}: expected {allowed}.")):
        _settings(**{key: value})


@pytest.mark.parametrize(
    ("key", "value", "allowed"),
    [
        ("encoding", "png", "null (any) or one of raw, jpeg"),
        ("jpeg_quality", 0, "null (any) or an int from 1 to 100"),
        ("jpeg_quality", True, "null (any) or an int from 1 to 100"),
    ],
)
def test_bad_dataset_encoding_or_quality_is_refused_naming_the_key(
    tmp_path: Path, key: str, value: object, allowed: str
) -> None:
    message = re.escape(f"dataset.{key}={value!r}: expected {allowed}.")
    with pytest.raises(ValueError, match=message):
        CachedImages(str(tmp_path), "train", **{key: value})  # checked before the cache is read


def _damage_jpeg_entries(folder: Path) -> dict[int, str]:
    """Damage five entries of a jpeg cache at once, each its own way; the reason each gives."""
    rows = np.fromfile(folder / "index.i64", dtype=np.int64).reshape(-1, 5)
    data = bytearray((folder / "jpegs.bin").read_bytes())

    def set_sof(i: int, width: int, height: int) -> None:
        sof = data.index(b"\xff\xc0", int(rows[i, 0]))
        data[sof + 5 : sof + 9] = struct.pack(">HH", height, width)

    set_sof(1, HUGE, HUGE)  # a lying header: 12.9 GB if believed
    set_sof(2, HUGE, HUGE)  # ... with the index row lying the same way
    rows[2, 2:4] = HUGE
    rows[3, 1] //= 2  # its bytes cut short
    rows[4, 1] = 0  # zero-length
    start, end = int(rows[5, 0]), int(rows[5, 0] + rows[5, 1])
    data[start:end] = bytes(end - start)  # zeroed
    last = len(rows) - 1
    del data[int(rows[last, 0]) + 10 :]  # the data file ends inside the last entry
    (folder / "jpegs.bin").write_bytes(data)
    rows.tofile(folder / "index.i64")
    return {
        1: f"declares {HUGE}x{HUGE} pixels, the index records the",
        2: f"{HUGE}x{HUGE} = 4,290,250,000 pixels, more than dataset.decode.max_image_pixels=89,478,485",
        3: "Image is incomplete or truncated",
        4: "the entry is empty (0 bytes)",
        5: "not a JPEG (first bytes b'\\x00",
        last: "bytes for it, the data file holds 10 there",
    }


def test_damaged_jpeg_entries_name_entry_source_and_rebuild_or_are_skipped(
    images: Path, tmp_path: Path
) -> None:
    files = ImageFolderDataset(str(images), "train")
    folder = tmp_path / "cache" / "train"
    write_split(files, folder, _settings(encoding="jpeg"), workers=0, context=None)
    reasons = _damage_jpeg_entries(folder)
    cached = CachedImages(str(tmp_path / "cache"), "train", check_sources=False)
    for i, reason in reasons.items():
        source = files.get_filename(i)
        with pytest.raises(SampleError) as caught:
            cached[i]
        message = str(caught.value)
        assert f"cache entry {i} " in message and f"cached from {source}: " in message
        assert reason in message, message
        rebuild = f"python train.py mode=cache cache.dir={tmp_path / 'cache'} cache.rebuild=true"
        assert rebuild in message and "dataset.decode.on_error=skip" in message
    skipping = CachedImages(
        str(tmp_path / "cache"), "train", check_sources=False, decode=DecodePolicy(on_error="skip")
    )
    for i in range(len(skipping)):
        sample = skipping[i]
        if i in reasons:
            assert isinstance(sample, BadSample) and sample.path == files.get_filename(i)
            assert sample.index == i and reasons[i] in sample.error
        else:
            assert sample[0].shape[0] == 3  # the other entries still read


def test_damaged_raw_entries_are_refused_not_reshaped(images: Path, tmp_path: Path) -> None:
    files = ImageFolderDataset(str(images), "train")
    folder = tmp_path / "cache" / "train"
    write_split(files, folder, _settings(), workers=0, context=None)
    rows = np.fromfile(folder / "index.i64", dtype=np.int64).reshape(-1, 5)
    rows[0, 2] += 1  # one row more than its bytes hold
    rows.tofile(folder / "index.i64")
    pixels = folder / "pixels.u8"
    pixels.write_bytes(pixels.read_bytes()[: int(rows[-1, 0]) + 3])
    cached = CachedImages(str(tmp_path / "cache"), "train", check_sources=False)
    height, width = int(rows[0, 2]), int(rows[0, 3])
    with pytest.raises(SampleError, match=rf"entry 0 .*are not the {height}x{width} RGB pixels"):
        cached[0]
    with pytest.raises(SampleError, match=rf"entry {len(rows) - 1} .*the data file holds 3 there"):
        cached[len(rows) - 1]
