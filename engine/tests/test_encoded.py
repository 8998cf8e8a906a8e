"""dataset.decode.device=main: the workers send encoded bytes with each sample's crop, the main
process decodes each batch at once and resamples the crops in one op: the workers' own pixels
to within interpolation, the same crops under the same seed, every EXIF orientation turned as
Pillow turns it, augmentations that repeat under the seed whatever the worker count, a step
without a batched form refused at start, and a bad file named, or left out under
on_error=skip."""

from __future__ import annotations

import io
import shutil
import struct
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image, ImageOps
from torchvision.transforms import v2

from engine.data.batched_geometry import Geometry, Plan
from engine.data.datasets.imagefolder import ImageFolderDataset
from engine.data.decode import SampleError
from engine.data.decode_policy import DecodePolicy
from engine.data.encoded import EXIF_ORIENTATION, BatchDecoder, EncodedBatch, upright
from engine.data.loader_settings import LoaderSettings
from engine.data.loaders import make_loader
from engine.data.samplers import RandomOrder, SequentialOrder
from engine.data.seeded import SeededSamples
from engine_dev.small_sets import loader_settings

VAL = v2.Compose([v2.Resize(40, antialias=True), v2.CenterCrop(32)])
TRAIN = v2.Compose([v2.RandomResizedCrop(32, antialias=True), v2.RandomHorizontalFlip()])


def _settings(workers: int) -> LoaderSettings:
    return loader_settings(8, workers)


def _tree(demo_dir: Path, tmp_path: Path) -> Path:
    """The demo's val folder (JPEG, PNG, WebP, ...), with an EXIF-rotated JPEG added."""
    root = tmp_path / "tree"
    shutil.copytree(demo_dir / "imagefolder" / "val", root / "val")
    pixels = np.random.default_rng(0).integers(0, 255, (30, 44, 3), np.uint8)
    image, exif = Image.fromarray(pixels), Image.new("RGB", (1, 1)).getexif()
    exif[EXIF_ORIENTATION] = 6
    image.save(root / "val" / "circle" / "turned.jpg", exif=exif.tobytes())
    return root


def _batches(root: Path, decode_device: str, workers: int, transform, seed: int = 0):
    """Every batch of the val folder, decoded by `decode_device`; the workers' path at full
    size (dataset.decode.reduced=false), as a batched decode has it."""
    data = ImageFolderDataset(
        str(root),
        "val",
        transform=transform,
        decode=DecodePolicy(reduced=False, device=decode_device),
    )
    seeded = SeededSamples(data, seed)
    order = RandomOrder(seeded, seed) if transform is TRAIN else SequentialOrder(seeded)
    loader = make_loader(seeded, _settings(workers), order, False, "val")
    return torch.cat([inputs for inputs, _ in loader]), torch.cat([y for _, y in loader])


def _gap(a: torch.Tensor, b: torch.Tensor) -> tuple[float, int]:
    """(mean, max) difference in levels."""
    gap = (a.int() - b.int()).abs()
    return float(gap.float().mean()), int(gap.max())


@pytest.mark.parametrize("transform", [VAL, TRAIN], ids=["val", "train"])
def test_main_gives_the_workers_pixels_and_crops_to_within_interpolation(
    demo_dir, tmp_path, transform
) -> None:
    """The same samples, order and crops as the workers' per-sample torchvision pipeline:
    roi_align against an antialiased resize differs by a level or two on average (these
    48-69 px images shrink by up to 2x); another seed's crops differ by tens of levels."""
    root = _tree(demo_dir, tmp_path)
    workers_x, workers_y = _batches(root, "cpu", 0, transform)
    main_x, main_y = _batches(root, "main", 2, transform)
    assert main_x.dtype == torch.uint8 and main_x.shape == (31, 3, 32, 32)
    assert torch.equal(main_y, workers_y)
    mean, top = _gap(main_x, workers_x)
    assert mean < 2.5 and top < 100, (mean, top)
    if transform is TRAIN:
        other, _ = _batches(root, "cpu", 0, transform, seed=1)
        assert _gap(other, workers_x)[0] > 8 * mean


def test_the_drawn_crop_is_torchvisions_own_draw() -> None:
    """Under one seed, the box and flip a worker sends are what v2 draws on that image."""
    crop, flip = v2.RandomResizedCrop(24, antialias=True), v2.RandomHorizontalFlip()
    geometry = Geometry.of(v2.Compose([crop, flip]), "transforms.train")
    image = torch.zeros(3, 37, 53, dtype=torch.uint8)
    for seed in range(50):
        torch.manual_seed(seed)
        params = crop.make_params([image])
        mirrored = not bool(torch.rand(1) >= flip.p)
        torch.manual_seed(seed)
        plan = geometry.draw(37, 53)
        top, left, h, w = (params[k] for k in ("top", "left", "height", "width"))
        assert plan == Plan((left, top, left + w, top + h), mirrored, 37, 53)


@pytest.mark.parametrize(
    ("step", "named"),
    [
        (v2.ColorJitter(0.4), r"transforms\.train\[2\] \(ColorJitter\) has no batched form"),
        (
            v2.Resize(24, interpolation=v2.InterpolationMode.BICUBIC),
            r"transforms\.train\[2\] \(Resize\): interpolation=bicubic has no batched form",
        ),
    ],
)
def test_a_step_without_a_batched_form_is_refused_when_the_loader_is_made(
    demo_dir, step, named
) -> None:
    pipeline = v2.Compose([*TRAIN.transforms, step, v2.CenterCrop(16)])
    data = ImageFolderDataset(
        str(demo_dir / "imagefolder"),
        "train",
        transform=pipeline,
        decode=DecodePolicy(device="main"),
    )
    with pytest.raises(ValueError, match=named + r".*dataset\.decode\.device=cpu"):
        make_loader(SeededSamples(data, 0), _settings(0), None, False, "train")


def test_main_augmentations_repeat_under_the_seed_whatever_the_workers(demo_dir, tmp_path):
    root = _tree(demo_dir, tmp_path)
    zero, _ = _batches(root, "main", 0, TRAIN)
    two, _ = _batches(root, "main", 2, TRAIN)
    other, _ = _batches(root, "main", 2, TRAIN, seed=1)
    assert torch.equal(zero, two) and not torch.equal(zero, other)
    assert len({row.sum().item() for row in zero}) > 25  # each sample its own crop


@pytest.mark.parametrize("orientation", range(1, 9))
def test_every_exif_orientation_turns_as_pillow_turns_it(orientation: int) -> None:
    pixels = np.random.default_rng(orientation).integers(0, 255, (5, 7, 3), np.uint8)
    image = Image.fromarray(pixels)
    exif = image.getexif()
    exif[EXIF_ORIENTATION] = orientation
    image.info["exif"] = exif.tobytes()
    out = io.BytesIO()
    image.save(out, "PNG", exif=exif.tobytes())
    expected = np.asarray(ImageOps.exif_transpose(Image.open(out)))
    turned = upright(torch.from_numpy(pixels).permute(2, 0, 1), orientation)
    assert np.array_equal(turned.permute(1, 2, 0).numpy(), expected)


def test_a_bad_file_is_named_or_left_out_and_listed(demo_dir, tmp_path) -> None:
    root = _tree(demo_dir, tmp_path)
    bad = root / "val" / "star" / "garbled.jpg"
    whole = (root / "val" / "circle" / "turned.jpg").read_bytes()
    scan = whole.index(b"\xff\xda")  # its header reads (in the worker); no image data follows
    bad.write_bytes(whole[:scan] + b"\xff\xd9")
    with pytest.raises(SampleError, match=r"sample \d+ from .*garbled\.jpg: .*on_error=skip"):
        _batches(root, "main", 0, VAL)
    data = ImageFolderDataset(
        str(root),
        "val",
        transform=VAL,
        decode=DecodePolicy(device="main", on_error="skip", max_bad_fraction=0.1),
    )
    loader = make_loader(SeededSamples(data, 0), _settings(2), None, False, "val")
    kept = sum(len(y) for _, y in loader)
    assert kept == len(data) - 1
    assert [b.path for b in loader.bad_samples.seen.values()] == [str(bad)]


def test_cuda_without_a_gpu_is_one_line_with_the_fix(demo_dir) -> None:
    if torch.cuda.is_available():
        pytest.skip("a GPU is here")
    with pytest.raises(ValueError, match=r"dataset\.decode\.device=cuda: no CUDA device here; use"):
        ImageFolderDataset(str(demo_dir / "imagefolder"), "val", decode=DecodePolicy(device="cuda"))


def _jpeg_with(path: Path, exif: bytes = b"") -> None:
    pixels = np.random.default_rng(3).integers(0, 255, (30, 40, 3), np.uint8)
    Image.fromarray(pixels).save(path, exif=exif)


def _orientation_as_text(text: bytes) -> bytes:
    """An EXIF block whose orientation tag holds ASCII `text` (3 bytes and a NUL)."""
    entry = struct.pack("<HHI4s", EXIF_ORIENTATION, 2, 4, text + b"\0")  # type 2: ASCII
    return b"Exif\0\0II*\0" + struct.pack("<IH", 8, 1) + entry + struct.pack("<I", 0)


def test_main_keeps_the_users_pixel_limit_not_pillows(tmp_path, monkeypatch) -> None:
    """Pillow's own bomb limit (here lowered under the 1,200-pixel image) must not stand in
    for dataset.decode.max_image_pixels=null, as the workers' decode lets it through too."""
    (tmp_path / "val" / "a").mkdir(parents=True)
    _jpeg_with(tmp_path / "val" / "a" / "big.jpg")
    monkeypatch.setattr(Image, "MAX_IMAGE_PIXELS", 500)
    data = ImageFolderDataset(
        str(tmp_path),
        "val",
        decode=DecodePolicy(device="main", max_image_pixels=None, reduced=False),
    )
    loader = make_loader(SeededSamples(data, 0), _settings(0), None, False, "val")
    assert [tuple(x.shape) for x, _ in loader] == [(1, 3, 30, 40)]


def test_an_orientation_tag_that_is_no_orientation_is_ignored(tmp_path) -> None:
    (tmp_path / "val" / "a").mkdir(parents=True)
    _jpeg_with(tmp_path / "val" / "a" / "text.jpg", _orientation_as_text(b"abc"))
    nine = Image.new("RGB", (1, 1)).getexif()
    nine[EXIF_ORIENTATION] = 9
    _jpeg_with(tmp_path / "val" / "a" / "nine.jpg", nine.tobytes())
    main_x, _ = _batches(tmp_path, "main", 0, None)
    cpu_x, _ = _batches(tmp_path, "cpu", 0, None)
    assert torch.equal(main_x, cpu_x)


def test_a_jpeg_that_decodes_to_another_size_than_its_header_is_named_or_left_out(
    tmp_path,
) -> None:
    """Its crop was drawn on the declared size: cropping the decoded pixels with it would be
    a silent wrong sample, so it is a bad sample, named by file."""
    _jpeg_with(tmp_path / "liar.jpg")  # 40 x 30, but the plan says it was drawn on 20 x 20
    data = torch.frombuffer(bytearray((tmp_path / "liar.jpg").read_bytes()), dtype=torch.uint8)
    plan = Plan((0.0, 0.0, 20.0, 20.0), False, 20, 20)
    batch = (
        EncodedBatch([data], [str(tmp_path / "liar.jpg")], [7], [1], [plan]),
        torch.tensor([0]),
    )
    geometry = Geometry.of(v2.Compose([v2.CenterCrop(16)]), "transforms.val")
    strict = BatchDecoder(torch.device("cpu"), geometry, None, False, ["a"])
    with pytest.raises(SampleError, match=r"sample 7 from .*liar\.jpg: it decodes to 30x40 "):
        strict.batch(batch)
    out, bad = BatchDecoder(torch.device("cpu"), geometry, None, True, ["a"]).batch(batch)
    assert out is None and [b.path for b in bad] == [str(tmp_path / "liar.jpg")]
