"""A stream stopped mid-epoch in one process goes on as a 2-rank torchrun job and trains every
sample of the epoch exactly once (other worker counts, in-process: tests/test_stream_resume.py)."""

from __future__ import annotations

from collections import Counter

import pytest

from engine_dev.fixtures import assert_each_once
from tests.conftest import tiny_model
from tests.process.test_distributed import torchrun
from tests.test_stream_resume import RUN, _killed_with_2_workers

# `make test-slow`: ~35 s of 2 cores (a killed run, then a 2-rank torchrun job); other worker
# counts in-process run in `make test` (tests/test_stream_resume.py)
pytestmark = pytest.mark.slow


def test_one_process_stopped_mid_epoch_goes_on_as_two_ranks_each_sample_once(
    make_cfg, demo_dir, tmp_path, monkeypatch
) -> None:
    """The exactly-once check across a world-size change: 1 process x 2 workers with batches
    of 4, stopped in epoch 1; 2 ranks x batches of 2 (the same global batch, so the same run)."""
    out, data = tmp_path / "run", f"paths.data_dir={tmp_path}"  # as train.py would resolve it
    _killed_with_2_workers(make_cfg, monkeypatch, out, data)
    overrides = [o for o in RUN if not o.startswith("loader.batch_size")]
    result = torchrun(
        f"paths.demo_dir={demo_dir}",
        data,
        f"paths.output_dir={out}",
        f"paths.log_dir={tmp_path / 'outputs'}",  # Hydra's run dir: here, not in the checkout
        *overrides,
        "loader.batch_size=2",
        "loader.num_workers=1",
        "trainer.resume=auto",
        *tiny_model(demo_dir),
        cwd=tmp_path,
    )
    assert result.returncode == 0, result.stderr[-4000:]
    assert_each_once(out)
    ranks = Counter(line.split(",")[2] for line in (out / "samples.csv").read_text().splitlines())
    assert ranks["0"] and ranks["1"]  # both ranks trained
