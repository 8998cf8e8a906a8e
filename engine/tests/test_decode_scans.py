"""A JPEG of thousands of scans (a 466 KB one of 10,000 took 98 s to decode) is refused from
its bytes before any decoding, in one line naming the file and the key that sets the limit
(`dataset.decode.max_jpeg_scans`, on every decode path); real progressive JPEGs (~10 scans) decode as
before."""

from __future__ import annotations

import io
import time

import numpy as np
import pytest
from PIL import Image

from engine.data.datasets.imagefolder import ImageFolderDataset
from engine.data.decode import SampleError, decode_image_bytes, load_sample
from engine.data.decode_policy import DecodePolicy
from engine.data.image_header import MAX_JPEG_SCANS, TooManyScans, check_scans, jpeg_scans
from engine.data.loaders import make_loader
from engine.data.seeded import SeededSamples
from engine_dev.small_sets import loader_settings

LIMIT = 89_478_485  # the default dataset.decode.max_image_pixels


def _progressive(channels: int, comment: bytes = b"") -> bytes:
    pixels = np.random.default_rng(channels).integers(0, 256, (48, 64, channels), np.uint8)
    buffer = io.BytesIO()
    Image.fromarray(pixels.squeeze()).save(buffer, "JPEG", progressive=True, comment=comment)
    return buffer.getvalue()


def _with_scans(data: bytes, scans: int) -> bytes:
    """`data` with its last scan (SOS segment and entropy-coded data) repeated up to `scans`
    scans: structurally sound, as the hostile files are."""
    last = data.rfind(b"\xff\xda")
    return data[:-2] + data[last:-2] * (scans - jpeg_scans(data, scans)) + b"\xff\xd9"


@pytest.mark.parametrize(("channels", "scans"), [(3, 10), (1, 6)])
def test_a_real_progressive_jpeg_counts_its_scans_and_decodes(channels, scans) -> None:
    data = _progressive(channels)
    assert jpeg_scans(data, MAX_JPEG_SCANS) == scans  # libjpeg's progression script
    assert decode_image_bytes(data, "p.jpg").shape == (3, 48, 64)
    buffer = io.BytesIO()
    Image.open(io.BytesIO(data)).save(buffer, "JPEG")  # baseline: one scan
    assert jpeg_scans(buffer.getvalue(), MAX_JPEG_SCANS) == 1


@pytest.mark.parametrize("min_side", [None, 8])  # full decode (TorchCodec), reduced (Pillow)
def test_a_jpeg_of_10000_scans_is_refused_before_decoding_naming_the_file(
    tmp_path, min_side
) -> None:
    path = tmp_path / "scans.jpg"
    path.write_bytes(_with_scans(_progressive(3), 10_000))
    start = time.perf_counter()
    with pytest.raises(SampleError) as refused:
        load_sample(str(path), 7, "cat", min_side)
    assert time.perf_counter() - start < 1
    message = str(refused.value)
    assert (
        f"sample 7 (class 'cat') from {path}: it holds more than {MAX_JPEG_SCANS} scans" in message
    )
    assert "\n" not in message and "dataset.decode.on_error=skip" in message
    assert (
        f"(dataset.decode.max_jpeg_scans={MAX_JPEG_SCANS}; a progressive JPEG has about 10)"
        in message
    )
    assert "raise dataset.decode.max_jpeg_scans if this file is genuine" in message


def test_a_raised_limit_lets_a_file_through_and_null_lifts_it(tmp_path) -> None:
    """150 scans: refused under the default, read under dataset.decode.max_jpeg_scans=200 (by the
    decoder and by a dataset given the key), and with null (no limit)."""
    data = _with_scans(_progressive(3), 150)
    with pytest.raises(
        TooManyScans, match=r"more than 100 scans \(dataset\.decode\.max_jpeg_scans=100;"
    ):
        decode_image_bytes(data, "s.jpg")
    with pytest.raises(
        TooManyScans, match=r"more than 149 scans \(dataset\.decode\.max_jpeg_scans=149;"
    ):
        check_scans(data, 149)
    check_scans(data, 150)
    check_scans(data, None)
    for min_side in (None, 8):  # full decode (TorchCodec), reduced (Pillow)
        assert decode_image_bytes(data, "s.jpg", min_side, LIMIT, 200).shape[0] == 3
        assert decode_image_bytes(data, "s.jpg", min_side, LIMIT, None).shape[0] == 3
    (tmp_path / "val" / "a").mkdir(parents=True)
    (tmp_path / "val" / "a" / "s.jpg").write_bytes(data)
    for limit, reads in ((None, True), (200, True), (100, False)):
        dataset = ImageFolderDataset(
            str(tmp_path), "val", decode=DecodePolicy(max_jpeg_scans=limit)
        )
        assert (dataset.check_sample(0) is None) == reads, limit
    refused = ImageFolderDataset(
        str(tmp_path), "val", decode=DecodePolicy(on_error="skip")
    ).check_sample(0)
    assert refused is not None and "dataset.decode.max_jpeg_scans=100" in refused.error


@pytest.mark.parametrize("limit", [MAX_JPEG_SCANS, 50])
def test_decode_device_main_refuses_a_bomb_in_the_worker_naming_the_key(tmp_path, limit) -> None:
    """dataset.decode.device=main: the worker counts the scans before it sends the bytes
    (TorchCodec's batched decode has no such guard), under the dataset's own limit."""
    (tmp_path / "val" / "a").mkdir(parents=True)
    (tmp_path / "val" / "a" / "bomb.jpg").write_bytes(_with_scans(_progressive(3), 10_000))
    data = ImageFolderDataset(
        str(tmp_path),
        "val",
        decode=DecodePolicy(device="main", reduced=False, max_jpeg_scans=limit),
    )
    settings = loader_settings(8)
    loader = make_loader(SeededSamples(data, 0), settings, None, False, "val")
    start = time.perf_counter()
    with pytest.raises(SampleError, match=rf"bomb\.jpg: it holds more than {limit} scans") as err:
        next(iter(loader))
    assert time.perf_counter() - start < 5
    assert f"dataset.decode.max_jpeg_scans={limit};" in str(err.value)


def test_the_count_walks_segments_and_stops_past_the_limit() -> None:
    hostile = _with_scans(_progressive(3), 10_000)
    assert jpeg_scans(hostile, 10**6) == 10_000
    assert jpeg_scans(hostile, MAX_JPEG_SCANS) == MAX_JPEG_SCANS + 1
    assert jpeg_scans(_with_scans(_progressive(3), MAX_JPEG_SCANS), 10**6) == MAX_JPEG_SCANS
    commented = _progressive(3, comment=b"\xff\xda" * 500)  # SOS bytes inside a segment
    assert commented.count(b"\xff\xda") > MAX_JPEG_SCANS  # past the quick bound: walked
    assert jpeg_scans(commented, 10**6) == 10
    check_scans(commented)
    assert decode_image_bytes(commented, "c.jpg").shape == (3, 48, 64)
