"""A file that cannot be decoded is one error with the real cause: the configured pixel limit,
the decoder's own reason on every path, and the warnings it gave on the way."""

from __future__ import annotations

import random
import warnings
from pathlib import Path

import pytest
from PIL import Image

from engine.data.decode import SampleError, load_sample
from engine.data.image_header import open_image
from engine_dev.hostile import (
    HUGE,
    lying_images,
    odd_jpegs,
    tiff_with_a_lying_tag,
    truncated_tiff,
)

LIMIT = 89_478_485  # the default dataset.decode.max_image_pixels


def _file(tmp_path: Path, name: str, data: bytes) -> str:
    (tmp_path / name).write_bytes(data)
    return str(tmp_path / name)


def test_a_bomb_pillow_refuses_names_the_configured_limit_and_its_size(tmp_path, monkeypatch):
    # Pillow's default, restored after: a decode with max_image_pixels=null earlier in this
    # process lifted Pillow's global limit for good (engine/data/image_header.py open_image)
    monkeypatch.setattr(Image, "MAX_IMAGE_PIXELS", LIMIT)
    gif = lying_images(random.Random(0))["lying.gif"]  # Pillow's own check refuses it on open
    with pytest.raises(SampleError) as caught:
        load_sample(_file(tmp_path, "bomb.gif", gif), 0, "x", None, LIMIT)
    message = str(caught.value)
    stated = (
        f"declares {HUGE * HUGE:,} pixels, more than dataset.decode.max_image_pixels={LIMIT:,} ("
    )
    assert stated in message
    assert "178956970" not in message and "178,956,970" not in message  # Pillow's 2x
    with open_image(gif, None) as image:  # null: no limit, Pillow's neither
        assert image.size == (HUGE, HUGE)


@pytest.mark.parametrize(
    ("name", "cause"),
    [
        ("twelve_bit.jpg", "Unsupported JPEG data precision 12"),
        ("no_components.jpg", "Empty JPEG image"),
    ],
)
def test_reduced_decode_keeps_the_decoders_cause(tmp_path, name, cause) -> None:
    path = _file(tmp_path, name, odd_jpegs(random.Random(0))[name])
    messages = []
    for min_side in (None, 16):  # full decode, then at reduced scale (200 >= 2 x 16)
        with pytest.raises(SampleError, match=f"{name}: {cause}") as caught:
            load_sample(path, 0, "x", min_side, LIMIT)
        messages.append(str(caught.value))
    assert messages[0] == messages[1]


def test_pillows_warnings_join_the_files_error_not_the_console(tmp_path) -> None:
    path = _file(tmp_path, "cut.tiff", truncated_tiff(random.Random(0)))
    with warnings.catch_warnings(record=True) as leaked:
        warnings.simplefilter("always")
        with pytest.raises(SampleError, match=r"cut\.tiff: .*; warned: Truncated File Read\. "):
            load_sample(path, 0, "x", None, LIMIT)
    assert not [w for w in leaked if "Truncated" in str(w.message)]
    readable = _file(tmp_path, "tag.tiff", tiff_with_a_lying_tag(random.Random(0)))
    with pytest.warns(UserWarning, match="Tag data larger than file"):  # decoded: shown as usual
        assert load_sample(readable, 0, "x", None, LIMIT).shape[0] == 3
