"""`model.preprocess` (engine/inference/preprocess.py) takes what a notebook holds: the same
image gives the same batch as a file (str or Path), a PIL image (RGBA and grey too), an array
or a tensor (HWC or CHW), alone or mixed in one list, 16-bit grey included, and an
input that is no image (object, float, empty, 5-channel, meta, bytes, None) is refused, and a
file that cannot be read reported, in one line naming its index and what to give."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from PIL import Image
from torchvision.transforms import v2

from engine.data.decode import SampleError
from engine.data.transforms import Pipelines
from engine.inference.preprocess import Preprocess

PREPROCESS = Preprocess(Pipelines([], [v2.Resize(8)], mean=[0.5] * 3, std=[0.25] * 3))
PIXELS = torch.randint(
    0, 256, (3, 12, 10), dtype=torch.uint8, generator=torch.Generator().manual_seed(0)
)


def test_a_16_bit_png_gives_one_batch_by_path_by_pil_image_and_by_array(tmp_path) -> None:
    grey16 = np.random.default_rng(0).integers(0, 2**16, (12, 10), dtype=np.uint16)
    Image.fromarray(grey16).save(tmp_path / "deep.png")
    by_path = PREPROCESS(tmp_path / "deep.png")
    with Image.open(tmp_path / "deep.png") as picture:
        assert picture.mode == "I;16"
        assert torch.equal(PREPROCESS(picture), by_path)  # convert("RGB") clipped it to 255
    assert torch.equal(PREPROCESS(grey16), by_path)
    high_byte = torch.from_numpy((grey16 >> 8).astype(np.uint8)).expand(3, -1, -1)
    assert torch.equal(PREPROCESS(high_byte), by_path)


def test_files_pil_images_arrays_and_tensors_give_one_batch(tmp_path) -> None:
    pixels = torch.randint(0, 256, (3, 60, 70), dtype=torch.uint8)
    picture = Image.fromarray(pixels.permute(1, 2, 0).numpy())
    picture.save(tmp_path / "a.png")
    one = PREPROCESS(pixels)
    assert one.shape[:2] == (1, 3) and one.dtype == torch.float32
    forms = {
        "str": str(tmp_path / "a.png"),
        "Path": tmp_path / "a.png",
        "PIL": picture,
        "RGBA PIL": picture.convert("RGBA"),  # converted to RGB, as files are decoded
        "HWC tensor": pixels.permute(1, 2, 0),
        "HWC array": pixels.permute(1, 2, 0).numpy(),  # as cv2 and np.asarray(pil) give them
    }
    for name, image in forms.items():
        assert torch.equal(PREPROCESS(image), one), name
    hwc = pixels.permute(1, 2, 0).numpy()
    for mode in ("L", "RGBA"):  # an array of each kind: as its PIL image, as its file
        image = Image.fromarray(hwc).convert(mode)
        image.save(tmp_path / f"{mode}.png")
        as_array = PREPROCESS(np.asarray(image))
        assert torch.equal(as_array, PREPROCESS(image)), mode
        assert torch.equal(as_array, PREPROCESS(tmp_path / f"{mode}.png")), mode
    mixed = PREPROCESS([*forms.values(), pixels])
    assert torch.equal(mixed, one.expand(len(forms) + 1, -1, -1, -1))
    with pytest.raises(TypeError, match=r"image 1 is a torch\.float32 tensor .* uint8 tensors or"):
        PREPROCESS([pixels, pixels.float()])


def test_grey_and_rgba_tensors_give_what_their_arrays_give() -> None:
    hwc = PIXELS.permute(1, 2, 0).numpy()
    rgba = np.dstack([hwc, np.full(hwc.shape[:2], 9, np.uint8)])
    assert torch.equal(PREPROCESS(torch.from_numpy(rgba)), PREPROCESS(rgba))
    grey = hwc[..., :1]
    assert torch.equal(PREPROCESS(torch.from_numpy(grey)), PREPROCESS(grey[..., 0]))


@pytest.mark.parametrize(
    ("image", "says"),
    [
        (np.empty((12, 10, 3), dtype=object), r"numpy object array .* np\.asarray\(x, dtype="),
        (np.array([[1, "a"], [2, 3]], dtype=object), "numpy object array of shape"),
        (np.zeros((0, 10, 3), np.uint8), r"shape \(0, 10, 3\), which holds no pixels"),
        (np.zeros((0, 0), np.uint8), "which holds no pixels; give an image at least 1 x 1"),
        (torch.zeros((3, 12, 0), dtype=torch.uint8), "tensor of shape .* holds no pixels"),
        (Image.new("RGB", (0, 5)), r"a PIL image of size \(0, 5\), which holds no pixels"),
        (np.zeros((12, 10, 5), np.uint8), r"\(12, 10, 5\).* 1 \(grey\), 3 \(RGB\) or 4 \(RGBA\)"),
        (np.zeros((5, 12, 10), np.uint8), "first and last axes are no channel count"),
        (torch.zeros((5, 12, 10), dtype=torch.uint8), r"torch\.uint8 tensor .* channels"),
        (np.zeros((12, 10, 3), np.float32), r"float32 array .* scale it to 0-255"),
        (np.zeros((12, 10, 3), np.uint16), r"uint16 array of shape \(12, 10, 3\)"),
        (torch.zeros((3, 12, 10), dtype=torch.uint8, device="meta"), "on the meta device"),
        (Image.new("F", (10, 12), 0.5), r"float mode 'F'; scale it to 0-255"),  # was near black
        (Image.new("I", (10, 12), 300), r"mode 'I' .* image\.convert\('I;16'\)"),  # clipped
        (b"\xff\xd8\xff", r"encoded bytes \(give the file's path, or PIL\.Image\.open"),
        ({"a": 1}, "a dict; give file paths"),
    ],
)
def test_what_is_no_image_is_refused_in_one_line_naming_its_index(image, says) -> None:
    with pytest.raises(TypeError, match=r"^model\.preprocess: image 1 is ") as refused:
        PREPROCESS([PIXELS, image])
    assert "\n" not in str(refused.value)
    assert refused.match(says)


def test_no_images_is_refused_in_one_line() -> None:
    with pytest.raises(ValueError, match=r"^model\.preprocess: no images given; give file"):
        PREPROCESS([])


@pytest.mark.parametrize(
    ("images", "says"),
    [
        (None, "a NoneType"),  # was: 'NoneType' object is not iterable
        ({"a": 1}, "a dict"),  # was: FileNotFoundError 'a' (its key read as a path)
        (b"\xff\xd8", "encoded bytes"),  # was: image 0 is a int
        (torch.tensor(5, dtype=torch.uint8), r"a Tensor of shape \(\)"),
    ],
)
def test_an_input_that_holds_no_images_is_refused_in_one_line(images, says) -> None:
    with pytest.raises(TypeError, match=rf"^model\.preprocess: the input is {says}.*; give file"):
        PREPROCESS(images)


def test_a_file_that_cannot_be_read_is_one_line_naming_its_index_and_path(tmp_path) -> None:
    progressive = tmp_path / "scans.jpg"
    Image.fromarray(PIXELS.permute(1, 2, 0).numpy()).save(progressive, progressive=True)
    for index, (path, says) in enumerate(
        [
            (tmp_path, "it is a directory, not an image file"),
            (tmp_path / "missing.png", "No such file or directory"),
            (progressive, r"it holds more than 1 scans \(load_model's max_jpeg_scans=1;"),
        ]
    ):
        with pytest.raises(
            SampleError, match=rf"^model\.preprocess: cannot read image {index + 1}"
        ):
            Preprocess(PREPROCESS.pipelines, max_scans=1)([PIXELS] * (index + 1) + [path])
        with pytest.raises(SampleError, match=rf"from {path}: {says}"):
            Preprocess(PREPROCESS.pipelines, max_scans=1)([path])


def test_predict_names_a_uint8_batch_and_a_sample_without_its_batch_axis() -> None:
    """torch's own errors (a dtype mismatch deep in a conv) named neither the call nor the fix."""
    from engine.inference.labeller import Labeller
    from engine.inference.model import Predict

    model = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(3 * 8 * 8, 2))
    model.labeller = Labeller(["cat", "dog"])
    predict = Predict(model, [3, 8, 8])
    with pytest.raises(
        TypeError,
        match=r"not uint8 images \(shape \[2, 3, 8, 8\]\): model\.predict\(model\.preprocess",
    ):
        predict(torch.zeros(2, 3, 8, 8, dtype=torch.uint8))
    with pytest.raises(
        ValueError, match=r"a batch \(N, 3, 8, 8\), not one sample of shape \[3, 8, 8\]"
    ):
        predict(torch.zeros(3, 8, 8))
    for given, says in [
        (torch.zeros(1, 8, 8, 3), r"of 3 channels first .*not \[1, 8, 8, 3\] \(channels last"),
        (
            torch.zeros(1, 3, 8, 8, dtype=torch.float64),
            r"float32 batches, as model.preprocess gives, not torch.float64",
        ),
        ([torch.zeros(3, 8, 8)], r"a batch tensor, not list"),
    ]:
        with pytest.raises((TypeError, ValueError), match=says):
            predict(given)
    with pytest.raises(TypeError, match=r"a batch tensor, not NoneType"):
        predict()
    labels, scores = predict(torch.zeros(1, 3, 8, 8))  # the float batch preprocess gives
    assert len(labels) == 1 and scores.shape == (1, 2)
