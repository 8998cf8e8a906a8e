"""A generated-input fuzz pass: damaged and lying images in every format, hostile CSV listings
and damaged tar shards, each read as the template reads it in a child process under an
address-space limit. None may crash the process, hang, allocate past the pixel limit, or fail
with anything but one line naming the input."""

from __future__ import annotations

import json
import os
import random
import re
import subprocess
import sys
from pathlib import Path

import pytest

from engine.core.text import shown
from engine.testing.hostile import (
    damaged_shards,
    hostile_csvs,
    lying_images,
    mutations,
    real_large_png,
    valid_images,
    write_images,
)

pytestmark = pytest.mark.process  # every input is read in a child process

ROOT = Path(__file__).resolve().parents[2]
SEED = int(os.environ.get("FUZZ_SEED", "0"))  # another seed: FUZZ_SEED=7 make test
LIMIT = 89_478_485  # the default dataset.max_image_pixels
HEADROOM = 2**30  # address space the child may add: far below what a lying header asks for
EXPECTED = {
    "image": {"SampleError"},
    "csv": {"ValueError", "FileNotFoundError"},
    "shard": {"ShardError", "SampleError"},
}


def _run(items: list[dict], tmp_path: Path) -> dict[str, dict]:
    """Read every item in the fuzz child; its result per path. The child must exit normally
    within the time limit (a signal, e.g. SIGSEGV, or a hang fails here)."""
    job = tmp_path / "job.json"
    job.write_text(json.dumps({"headroom_bytes": HEADROOM, "items": items}))
    done = subprocess.run(
        [sys.executable, "-m", "engine.tests.fuzz_child", str(job)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )
    assert done.returncode == 0, f"seed {SEED}: child ended with {done.returncode}: {done.stderr}"
    results = [json.loads(line) for line in done.stdout.splitlines()]
    assert len(results) == len(items), f"seed {SEED}: the child stopped early: {done.stderr}"
    return {r["path"]: r for r in results}


def _assert_one_line_naming(result: dict, kind: str, name: str) -> None:
    assert result["type"] in EXPECTED[kind], f"seed {SEED}: {result}"
    assert "\n" not in result["error"].strip(), f"seed {SEED}: {result['error']!r}"
    named = shown(name)  # as messages show it (a newline or a non-UTF-8 byte escaped)
    assert named in result["error"], f"seed {SEED}: {named!r} not named in {result['error']!r}"


def test_damaged_and_lying_images_fail_cleanly_naming_the_file(tmp_path: Path) -> None:
    rng = random.Random(SEED)
    valid = valid_images(rng)
    damaged = {
        f"{how}_{name}": data
        for name, blob in valid.items()
        for how, data in mutations(blob, rng, 25)
    }
    lying = lying_images(rng) | {"huge_real.png": real_large_png()}
    paths = write_images(tmp_path / "images", valid | damaged | lying, rng)
    items = [{"kind": "image", "path": str(p), "max_pixels": LIMIT} for p in paths]
    items += [{**item, "min_side": 16} for item in items[::7]]  # the reduced-scale path too
    results = _run(items, tmp_path)
    for path, result in results.items():
        stem = Path(path).stem
        if stem.split("_", 2)[-1] in {name.rpartition(".")[0] for name in valid}:
            assert result["ok"], f"seed {SEED}: a valid image failed: {result}"
        if not result["ok"]:
            _assert_one_line_naming(result, "image", path)
        if any(stem.endswith(name.rpartition(".")[0]) for name in lying if "short" not in name):
            assert not result["ok"] and "dataset.max_image_pixels" in result["error"], result
    assert sum(not r["ok"] for r in results.values()) > len(damaged) // 3  # the damage is real


def test_hostile_csv_listings_parse_or_fail_naming_file_and_line(demo_dir, tmp_path) -> None:
    rng = random.Random(SEED)
    images = sorted((demo_dir / "imagefolder" / "train").glob("*/*.jpg"))[:6]
    rows = [(str(p.relative_to(demo_dir)), p.parent.name) for p in images]
    items = []
    for name, data in hostile_csvs(rows, rng).items():
        path = tmp_path / f"{name}.csv"
        path.write_bytes(data)
        items.append({"kind": "csv", "path": str(path), "root": str(demo_dir)})
    results = _run(items, tmp_path)
    for path, result in results.items():
        name = Path(path).stem
        if name in {"enc_utf-8", "enc_utf-8-sig", "crlf", "blank_lines", "cr_only"}:
            assert result["ok"], f"{name}: {result}"
            continue
        if result["ok"]:
            continue
        _assert_one_line_naming(result, "csv", path)
        if name not in {"empty_file", "header_only"}:
            assert re.search(re.escape(shown(path)) + r":\d+: ", result["error"]), result
    for name in (
        "enc_latin-1",
        "enc_cp1252",
        "enc_utf-16",
        "unclosed_quote",
        "extra_field",
        "nul_byte",
        "huge_field",
        "sparse_ints",
        "negative_int",
        "float_among_ints",
        "duplicate",
        "escape_dots",
        "escape_abs",
        "escape_home",
        "binary",
        "missing_file",
        "missing_field",
        "empty_file",
        "header_only",
    ):
        assert not results[str(tmp_path / f"{name}.csv")]["ok"], name


def test_damaged_tar_shards_fail_naming_the_shard(demo_dir, tmp_path) -> None:
    rng = random.Random(SEED)
    shard = (demo_dir / "shards" / "train-000000.tar").read_bytes()
    items = []
    for name, data in damaged_shards(shard, rng, 30).items():
        path = tmp_path / f"{name}.tar"
        path.write_bytes(data)
        items.append({"kind": "shard", "path": str(path)})
    results = _run(items, tmp_path)
    for path, result in results.items():
        if not result["ok"]:
            _assert_one_line_naming(result, "shard", path)
    assert not results[str(tmp_path / "huge_member.tar")]["ok"]


@pytest.mark.parametrize("name", ["short.png", "short_wide.png"])
def test_a_short_png_is_an_error_not_a_crash(tmp_path: Path, name: str) -> None:
    path = tmp_path / name
    path.write_bytes(lying_images(random.Random(0))[name])
    result = _run([{"kind": "image", "path": str(path), "max_pixels": LIMIT}], tmp_path)
    _assert_one_line_naming(result[str(path)], "image", str(path))
