"""A folder of phone photos, HEIC and AVIF, is a dataset like any other: listed, decoded upright
by their EXIF orientation, held to the pixel limit from their headers, trained on, and a
damaged one named by mode=validate."""

from __future__ import annotations

import csv
import random
import shutil
from pathlib import Path

import numpy as np
import pytest
from PIL import AvifImagePlugin, Image
from pillow_heif.as_plugin import HeifImageFile

from engine.data.datasets.imagefolder import ImageFolderDataset
from engine.data.decode import SampleError, decode_image_bytes, load_sample
from engine.modes.validate import validate
from engine_dev.hostile import lying_images
from engine_dev.photos import phone_photo, photo_like
from reference.loop import train

SIZE = (1008, 756)  # a 12 MP phone photo (4032 x 3024) at a quarter of each side
# split/class/file: (format, EXIF orientation); 6 = stored landscape, shown portrait
PHOTOS = {
    "train/cat/beach.heic": ("HEIF", None),
    "train/cat/dinner.avif": ("AVIF", 6),
    "train/dog/park.heic": ("HEIF", 6),
    "train/dog/sofa.avif": ("AVIF", None),
    "val/cat/garden.heic": ("HEIF", None),
    "val/dog/walk.avif": ("AVIF", None),
}


@pytest.fixture(scope="module")
def phone(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Image.Image]]:
    """The photo folder (root/train|val/class/file) and the image each file was made from."""
    root = tmp_path_factory.mktemp("phone")
    sources = {}
    for seed, (name, (fmt, orientation)) in enumerate(PHOTOS.items()):
        sources[name] = photo_like(*SIZE, seed=seed)
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_bytes(phone_photo(sources[name], fmt, orientation))
    return root, sources


def test_a_folder_of_heic_and_avif_photos_trains_one_epoch(phone, reference_cfg) -> None:
    root, _ = phone
    files = ImageFolderDataset(str(root), "train")
    suffixes = sorted(Path(files.get_filename(i)).suffix for i in range(len(files)))
    assert suffixes == [".avif", ".avif", ".heic", ".heic"]  # listed as images
    cfg = reference_cfg(
        "phone", f"dataset.root={root}", "trainer.max_epochs=1", "loader.batch_size=2"
    )
    assert train(cfg)["epochs"] == 1  # dataset.decode.on_error=raise: one unreadable photo stops it


@pytest.mark.parametrize("name", ["train/cat/dinner.avif", "train/dog/park.heic"])
def test_an_exif_rotated_photo_decodes_upright(phone, name: str) -> None:
    root, sources = phone
    decoded = decode_image_bytes((root / name).read_bytes(), name).permute(1, 2, 0).numpy()
    assert decoded.shape == (SIZE[0], SIZE[1], 3)  # portrait: shown turned 90 degrees clockwise
    clockwise, counter = (
        np.abs(_coarse(decoded) - _coarse(np.asarray(sources[name].transpose(turn)))).mean()
        for turn in (Image.Transpose.ROTATE_270, Image.Transpose.ROTATE_90)
    )
    assert clockwise < 2 and counter > 10  # per 28 px block: lossy coding's smoothing aside


def _coarse(pixels: np.ndarray) -> np.ndarray:
    """The mean colour of each 28 x 28 block."""
    height, width = pixels.shape[0] // 28, pixels.shape[1] // 28
    return pixels.reshape(height, 28, width, 28, 3).mean(axis=(1, 3))


def test_the_pixel_limit_is_checked_from_the_header_before_any_decode(phone, monkeypatch, tmp_path):
    root, _ = phone

    def decoded(self: Image.Image) -> None:
        raise AssertionError(f"{self.format} decoded its pixels")

    monkeypatch.setattr(HeifImageFile, "load", decoded)
    monkeypatch.setattr(AvifImagePlugin.AvifImageFile, "load", decoded)
    for name in ("train/cat/beach.heic", "train/dog/sofa.avif"):
        declared = f"declares {SIZE[0]}x{SIZE[1]} = {SIZE[0] * SIZE[1]:,} pixels, more than "
        with pytest.raises(
            SampleError, match=f"{declared}dataset.decode.max_image_pixels=500,000 "
        ):
            load_sample(str(root / name), 0, "cat", None, 500_000)
    for name in ("lying.heic", "lying.avif"):  # tiny files whose headers declare 256M+ pixels
        path = tmp_path / name
        path.write_bytes(lying_images(random.Random(0))[name])
        with pytest.raises(SampleError, match=r"dataset\.decode\.max_image_pixels=89,478,485 "):
            load_sample(str(path), 0, "cat", None, 89_478_485)


def test_validate_names_a_corrupt_heic_and_a_truncated_avif(phone, reference_cfg, tmp_path):
    root = shutil.copytree(phone[0], tmp_path / "tree")
    heic = (root / "train/cat/beach.heic").read_bytes()
    image_data = heic.index(b"mdat") + 8  # the HEVC stream, after its box header
    corrupt = root / "train/cat/corrupt.heic"
    corrupt.write_bytes(heic[:image_data] + b"\xff" * 64 + heic[image_data + 64 :])
    truncated = root / "train/dog/truncated.avif"
    truncated.write_bytes((root / "train/dog/sofa.avif").read_bytes()[:-100])
    cfg = reference_cfg("validate", "mode=validate", f"dataset.root={root}")
    assert validate(cfg)["validate/bad"] == 2
    with open(Path(cfg.paths.output_dir) / "bad_samples.csv", newline="") as f:
        errors = {row["path"]: row["error"] for row in csv.DictReader(f)}
    assert set(errors) == {str(corrupt), str(truncated)}
    assert all(error and "\n" not in error for error in errors.values()), errors
