"""A real-looking folder with several unreadable files at once (engine_dev.hostile.real_folder),
run as a user runs the reference project (its train.py, in this process): skip mode trains
every epoch and lists exactly the bad files; raise mode stops naming the first; validate lists
all. (A crash by signal is the fuzz pass's to catch: it reads every hostile file in a child,
test_fuzz.py.)"""

from __future__ import annotations

import csv
import json
import os
import random
from pathlib import Path

import pytest

from engine.core.text import shown
from engine.data.bad_samples import REPORT_TEXT
from engine_dev.cli import run_script
from engine_dev.hostile import lying_images, real_folder, short_png
from tests.conftest import TRAIN, reference_args


def _listed(run: Path) -> dict[str, str]:
    """path -> error of every row of the run's bad_samples.csv (file names byte for byte)."""
    with open(run / "bad_samples.csv", **REPORT_TEXT) as f:
        return {row["path"]: row["error"] for row in csv.DictReader(f)}


@pytest.mark.parametrize("workers", [0, 2])
def test_skip_trains_every_epoch_and_lists_exactly_the_bad_files(demo_dir, tmp_path, workers):
    root, bad = real_folder(demo_dir, tmp_path / "real")
    run = tmp_path / "run"
    result = run_script(
        TRAIN,
        *reference_args(
            demo_dir,
            tmp_path,
            f"dataset.root={root}",
            "dataset.decode.on_error=skip",
            "dataset.decode.max_bad_fraction=0.05",
            f"loader.num_workers={workers}",
            "loader.batch_size=8",  # batches of every size from 1 to 8 meet in the normaliser
            "trainer.max_epochs=2",
            f"hydra.run.dir={run}",
        ),
        cwd=tmp_path,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert json.loads((run / "metrics.json").read_text())["epochs"] == 2
    listed = _listed(run)
    assert sorted(listed) == sorted(bad)
    assert all(error and "\n" not in error for error in listed.values())
    log = (run / "train.log").read_text()
    assert shown(next(p for p in bad if "trunc_" in p)) in log  # the non-UTF-8 name, escaped


@pytest.mark.parametrize(
    ("name", "data", "reason"),
    [
        ("short.png", short_png(40, 40), "decode_png failed: Not enough image data"),
        (
            "bomb.jpg",
            lying_images(random.Random(0))["lying.jpg"],
            "dataset.decode.max_image_pixels=89,478,485",
        ),
        ("pipe.jpg", None, "a FIFO (named pipe), not an image file"),
    ],
)
def test_raise_stops_at_a_hostile_first_val_image_naming_it(demo_dir, tmp_path, name, data, reason):
    root = tmp_path / "tree"
    real_folder(demo_dir, root, copies=1)
    first = root / "val" / "circle" / f"000_{name}"  # sorts first: read in the main process
    if data is None:
        os.mkfifo(first)
    else:
        first.write_bytes(data)
    run = tmp_path / "run"
    result = run_script(
        TRAIN,
        *reference_args(
            demo_dir,
            tmp_path,
            f"dataset.root={root}",
            "loader.num_workers=0",
            f"hydra.run.dir={run}",
        ),
        cwd=tmp_path,
    )
    assert result.returncode == 1, (result.returncode, result.stderr[-2000:])
    message = f"from {first}: "
    assert message in result.stderr and reason in result.stderr
    last = (run / "train.log").read_text().strip().splitlines()[-2]  # [-1]: the run dir
    assert "run failed: SampleError" in last and message in last and reason in last


def test_validate_lists_every_bad_file_without_hanging(demo_dir, tmp_path) -> None:
    root, bad = real_folder(demo_dir, tmp_path / "real")
    run = tmp_path / "run"
    result = run_script(
        TRAIN,
        *reference_args(
            demo_dir,
            tmp_path,
            "mode=validate",
            f"dataset.root={root}",
            "dataset.decode.max_bad_fraction=0.05",
            "loader.num_workers=1000",  # capped at 4 per core, with a line saying so
            f"hydra.run.dir={run}",
        ),
        cwd=tmp_path,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert sorted(_listed(run)) == sorted(bad)
    assert "loader.num_workers=1000 is far above" in result.stdout  # the console log
