"""A generated-input fuzz pass: damaged and lying images in every format, hostile CSV listings,
damaged tar shards, damaged and lying shard manifests and damaged checkpoints, each read as the
template reads it in one child process under an address-space limit. None may crash the
process, hang, allocate past the pixel limit, or fail with anything but one line naming the
input."""

from __future__ import annotations

import io
import json
import os
import random
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
import torch

from engine.core.text import shown
from engine.runs.checkpoint_files import save_checkpoint
from engine_dev.hostile import (
    damaged_checkpoints,
    damaged_shards,
    hostile_csvs,
    hostile_manifests,
    lying_images,
    mutations,
    real_large_png,
    valid_images,
    write_images,
)

pytestmark = pytest.mark.process  # every input is read in a child process

ROOT = Path(__file__).resolve().parents[2]
SEED = int(os.environ.get("FUZZ_SEED", "0"))  # another seed: FUZZ_SEED=7 make test
LIMIT = 89_478_485  # the default dataset.decode.max_image_pixels
HEADROOM = 2**30  # address space the child may add: far below what a lying header asks for
EXPECTED = {
    "image": {"SampleError"},
    "csv": {"ValueError", "FileNotFoundError"},
    "shard": {"ShardError", "SampleError"},
    "manifest": {"ValueError", "ShardError"},
    "checkpoint": {"CheckpointError", "ConfigError"},
}
# manifests that lie about their shard or break the format: each must be refused
LIES = (
    "more_samples", "fewer_samples", "no_samples", "huge_samples", "negative_samples",
    "text_samples", "bool_samples", "short_labels", "text_labels", "null_labels",
    "label_past_classes", "other_labels", "bad_errors", "classes_text", "shards_list", "entry_list",
    "no_format", "future_version", "top_level_list", "deep_nesting", "nan_samples", "latin1",
)  # fmt: skip


def _read_in_a_child(items: list[dict], folder: Path) -> dict[str, dict]:
    """Read every item in the fuzz child; its result per path. The child must exit normally
    within the time limit (a signal, e.g. SIGSEGV, or a hang fails here, naming the input it
    was reading: the first without a result)."""
    job = folder / "job.json"
    job.write_text(json.dumps({"headroom_bytes": HEADROOM, "items": items}))
    done = subprocess.run(
        [sys.executable, "-m", "engine_dev.fuzz_child", str(job)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )
    results = {r["path"]: r for r in map(json.loads, done.stdout.splitlines())}
    unread = [item["path"] for item in items if item["path"] not in results]
    reading = f"while reading {unread[0]}" if unread else "after every input"
    assert done.returncode == 0, f"seed {SEED}: the child ended with {done.returncode} {reading}"
    assert not unread, f"seed {SEED}: the child stopped early {reading}: {done.stderr}"
    return results


@dataclass
class Fuzzed:
    """What the child read, and what the tests need to judge it."""

    results: dict[str, dict]
    valid: set[str]  # stems of the valid images
    lying: set[str]  # stems of the images lying about their size (not cut short)
    damaged: int  # damaged images written
    images: Path  # the folder of the images
    csvs: Path  # the folder of the hostile CSVs
    shards: Path  # the folder of the damaged shards
    manifests: Path  # the folder of the hostile manifests (beside the shard they describe)
    checkpoints: Path  # the folder of the damaged checkpoints
    short_pngs: dict[str, Path]


def _image_items(folder: Path) -> tuple[list[dict], set[str], set[str], int]:
    rng = random.Random(SEED)
    valid = valid_images(rng)
    damaged = {
        f"{how}_{name}": data
        for name, blob in valid.items()
        for how, data in mutations(blob, rng, 25)
    }
    lying = lying_images(rng) | {"huge_real.png": real_large_png()}
    paths = write_images(folder, valid | damaged | lying, rng)
    items = [{"kind": "image", "path": str(p), "max_pixels": LIMIT} for p in paths]
    items += [{**item, "min_side": 16} for item in items[::7]]  # the reduced-scale path too
    stems = {name.rpartition(".")[0] for name in valid}
    liars = {name.rpartition(".")[0] for name in lying if "short" not in name}
    return items, stems, liars, len(damaged)


def _csv_items(demo_dir: Path, folder: Path) -> list[dict]:
    rng = random.Random(SEED)
    images = sorted((demo_dir / "imagefolder" / "train").glob("*/*.jpg"))[:6]
    rows = [(str(p.relative_to(demo_dir)), p.parent.name) for p in images]
    folder.mkdir()
    items = []
    for name, data in hostile_csvs(rows, rng).items():
        path = folder / f"{name}.csv"
        path.write_bytes(data)
        items.append({"kind": "csv", "path": str(path), "root": str(demo_dir)})
    return items


def _shard_items(demo_dir: Path, folder: Path) -> list[dict]:
    rng = random.Random(SEED)
    shard = (demo_dir / "shards" / "train-000000.tar").read_bytes()
    folder.mkdir()
    items = []
    for name, data in damaged_shards(shard, rng, 30).items():
        path = folder / f"{name}.tar"
        path.write_bytes(data)
        items.append({"kind": "shard", "path": str(path)})
    return items


def _manifest_items(demo_dir: Path, folder: Path) -> list[dict]:
    """Hostile manifests of a copy of one demo shard, whose entry matches the copy's size and
    mtime (so the manifest is believed, not read again)."""
    rng = random.Random(SEED)
    folder.mkdir()
    shard = folder / "train-000000.tar"
    shard.write_bytes((demo_dir / "shards" / "train-000000.tar").read_bytes())
    manifest = json.loads((demo_dir / "shards" / "shards.json").read_text())
    stat = shard.stat()
    entry = manifest["shards"][shard.name] | {"size": stat.st_size, "mtime_ns": stat.st_mtime_ns}
    valid = json.dumps(manifest | {"shards": {shard.name: entry}}, indent=1).encode()
    items = []
    for name, data in hostile_manifests(valid, shard.name, rng, 30).items():
        path = folder / f"{name}.json"
        path.write_bytes(data)
        items.append({"kind": "manifest", "path": str(path), "shard": str(shard)})
    return items


def valid_checkpoint() -> bytes:
    """A checkpoint as train.py writes one (weights, optimizer state, config with its data's
    values) of a small model, as bytes."""
    torch.manual_seed(0)
    model = torch.nn.Linear(12, 5)
    optimizer = torch.optim.Adam(model.parameters())
    model(torch.randn(4, 12)).sum().backward()
    optimizer.step()
    config = {
        "model": {"_target_": "torch.nn.Linear", "in_features": 12, "out_features": 5},
        "transforms": {"_target_": "engine.data.transforms.Pipelines", "train": [], "val": []},
        "data": {"classes": ["a", "b", "c", "d", "e"], "input_shape": [12]},
    }
    state = {"model": model.state_dict(), "optimizer": optimizer.state_dict(), "config": config}
    state |= {"epoch": 1, "step": 1, "batches_done": None, "config_key": "0" * 16}
    buffer = io.BytesIO()
    torch.save(state, buffer)
    return buffer.getvalue()


def _checkpoint_items(folder: Path) -> list[dict]:
    rng = random.Random(SEED)
    folder.mkdir()
    items = []
    for name, data in damaged_checkpoints(valid_checkpoint(), rng, 40).items():
        path = folder / f"{name}.pt"
        path.write_bytes(data)
        items.append({"kind": "checkpoint", "path": str(path)})
    save_checkpoint(folder / "valid.pt", torch.load(io.BytesIO(valid_checkpoint())))
    return [*items, {"kind": "checkpoint", "path": str(folder / "valid.pt")}]


@pytest.fixture(scope="module")
def fuzzed(demo_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Fuzzed:
    """Every generated input of the pass, read in one child process."""
    tmp = tmp_path_factory.mktemp("fuzz")
    images, valid, lying, damaged = _image_items(tmp / "images")
    csvs, shards = _csv_items(demo_dir, tmp / "csvs"), _shard_items(demo_dir, tmp / "shards")
    manifests = _manifest_items(demo_dir, tmp / "manifests")
    checkpoints = _checkpoint_items(tmp / "checkpoints")
    (tmp / "short").mkdir()
    short = {name: tmp / "short" / name for name in ("short.png", "short_wide.png")}
    for name, path in short.items():
        path.write_bytes(lying_images(random.Random(0))[name])
    pngs = [{"kind": "image", "path": str(p), "max_pixels": LIMIT} for p in short.values()]
    results = _read_in_a_child([*images, *csvs, *shards, *manifests, *checkpoints, *pngs], tmp)
    folders = (tmp / "images", tmp / "csvs", tmp / "shards", tmp / "manifests", tmp / "checkpoints")
    return Fuzzed(results, valid, lying, damaged, *folders, short)


def _assert_one_line_naming(result: dict, kind: str, name: str) -> None:
    assert result["type"] in EXPECTED[kind], f"seed {SEED}: {result}"
    assert "\n" not in result["error"].strip(), f"seed {SEED}: {result['error']!r}"
    named = shown(name)  # as messages show it (a newline or a non-UTF-8 byte escaped)
    assert named in result["error"], f"seed {SEED}: {named!r} not named in {result['error']!r}"


def _under(fuzzed: Fuzzed, folder: Path) -> dict[str, dict]:
    """The results of the inputs in `folder`."""
    return {p: r for p, r in fuzzed.results.items() if Path(p).parent == folder}


def test_damaged_and_lying_images_fail_cleanly_naming_the_file(fuzzed: Fuzzed) -> None:
    images = _under(fuzzed, fuzzed.images)
    for path, result in images.items():
        stem = Path(path).stem
        if stem.split("_", 2)[-1] in fuzzed.valid:
            assert result["ok"], f"seed {SEED}: a valid image failed: {result}"
        if not result["ok"]:
            _assert_one_line_naming(result, "image", path)
        if any(stem.endswith(name) for name in fuzzed.lying):
            assert not result["ok"] and "dataset.decode.max_image_pixels" in result["error"], result
    assert sum(not r["ok"] for r in images.values()) > fuzzed.damaged // 3  # the damage is real


def test_hostile_csv_listings_parse_or_fail_naming_file_and_line(fuzzed: Fuzzed) -> None:
    results = _under(fuzzed, fuzzed.csvs)
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
        assert not results[str(fuzzed.csvs / f"{name}.csv")]["ok"], name


def test_damaged_tar_shards_fail_naming_the_shard(fuzzed: Fuzzed) -> None:
    results = _under(fuzzed, fuzzed.shards)
    for path, result in results.items():
        if not result["ok"]:
            _assert_one_line_naming(result, "shard", path)
    assert not results[str(fuzzed.shards / "huge_member.tar")]["ok"]


def test_damaged_and_lying_manifests_fail_naming_the_manifest_or_shard(fuzzed: Fuzzed) -> None:
    results = _under(fuzzed, fuzzed.manifests)
    shard = str(fuzzed.manifests / "train-000000.tar")
    for path, result in results.items():
        if not result["ok"]:  # the manifest's lies name it; a short shard names the shard
            named = shard if "where its manifest lists" in result["error"] else path
            _assert_one_line_naming(result, "manifest", named)
    for name in LIES:
        assert not results[str(fuzzed.manifests / f"{name}.json")]["ok"], name
    for name in ("traversal_key", "absolute_key"):  # unknown entries: the shard is read again
        assert results[str(fuzzed.manifests / f"{name}.json")]["ok"], name


def test_damaged_checkpoints_fail_naming_the_file(fuzzed: Fuzzed) -> None:
    results = _under(fuzzed, fuzzed.checkpoints)
    assert results[str(fuzzed.checkpoints / "valid.pt")]["ok"]
    for path, result in results.items():
        if not result["ok"]:
            _assert_one_line_naming(result, "checkpoint", path)
    assert sum(not r["ok"] for r in results.values()) > len(results) // 3  # the damage is real


@pytest.mark.parametrize("name", ["short.png", "short_wide.png"])
def test_a_short_png_is_an_error_not_a_crash(fuzzed: Fuzzed, name: str) -> None:
    """TorchCodec's libpng refuses the image data its header outruns (torchvision's decoder
    crashed the process on it, Pillow filled the rows with black): no pre-check is needed."""
    path = str(fuzzed.short_pngs[name])
    _assert_one_line_naming(fuzzed.results[path], "image", path)
    error = fuzzed.results[path]["error"]
    assert "decode_png failed: Not enough image data" in error and ".cpp" not in error, error
