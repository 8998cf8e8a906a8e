"""Faults during a run of the reference project: a hung or dead loader worker is named with
the sample and file it was reading (NaN losses: test_reference_project.py; kill -9:
process/)."""

from __future__ import annotations

import pytest

from engine.data.datasets.imagefolder import ImageFolderDataset
from engine_dev.cli import run_script
from tests.conftest import TRAIN, reference_args

FAULTY = "engine_dev.faulty.FaultyImageFolder"  # a dataset that misbehaves on purpose


@pytest.mark.parametrize(("fault", "expected"), [("hang", "timed out"), ("die", "exited")])
def test_a_hung_or_dead_worker_is_reported_with_its_file(demo_dir, tmp_path, fault, expected):
    culprit = ImageFolderDataset(str(demo_dir / "imagefolder"), "train").get_filename(5)
    args = reference_args(
        demo_dir,
        tmp_path,
        f"hydra.run.dir={tmp_path / 'run'}",
        f"allowed_targets_extra=[{FAULTY}]",
        f"dataset._target_={FAULTY}",
        f"+dataset.fault={fault}",
        "+dataset.at_index=5",
        "loader.num_workers=2",
        "loader.timeout=3",
        "trainer.max_epochs=1",
    )
    done = run_script(TRAIN, *args, cwd=tmp_path)  # a hang fails as one (pytest-timeout)
    assert done.returncode != 0
    assert expected in done.stderr and f"while reading sample 5 ({culprit})" in done.stderr
