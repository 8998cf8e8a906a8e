"""Elastic resume on what the template's conf/ alone offers: its other map-style kinds
(tensors, padded sequences, parquet row groups) resume mid-epoch with another split of the same
global batch and train the very same samples; another dataset=mix draw is refused mid-epoch,
its weights scaled alike are the same draw. The engine's guarantees (another split trains the
same samples, the refusals, sample granularity, samples.csv) are engine/tests/
test_elastic_resume.py's, on its reference project; other world sizes:
engine/tests/process/test_elastic_ranks.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from engine_dev.api import samples_by_step
from src.loop import train
from tests.train_process import kill_at_step

# 48 demo train images, batch 8: 6 steps an epoch, 12 in 2 epochs; no dropout and no
# BatchNorm, so a different split of a step's samples gives the same numbers up to rounding
RUN = (
    "trainer.max_epochs=2",
    "model=mlp",
    "model.hidden=[16]",
    "model.dropout=0",
    "trainer.record_samples=true",
    "trainer.checkpoint.every_n_steps=2",
)
KILLED_AT = 9  # epoch 2, batch 3: the last checkpoint is step 8's, mid-epoch 2


def _killed(make_cfg, monkeypatch, out: Path, *overrides: str) -> None:
    kill_at_step(monkeypatch, KILLED_AT)
    with pytest.raises(RuntimeError, match="killed"):
        train(make_cfg(*RUN, *overrides, f"paths.output_dir={out}"))
    monkeypatch.undo()


@pytest.mark.parametrize(
    ("kind", "batch"),
    [
        (("dataset=tensor",), 8),  # whole batches fetched at once (returns_batches)
        (("experiment=sequence_demo",), 64),  # token sequences padded by collate=pad
        (("dataset=parquet",), 8),  # read by row group, in runs of them (block_order)
    ],
)
def test_every_map_style_kind_resumes_with_another_split_and_records_its_samples(
    make_cfg, tmp_path, monkeypatch, kind, batch
) -> None:
    run = (
        *kind,
        "trainer.max_epochs=2",
        "trainer.record_samples=true",
        "trainer.checkpoint.every_n_steps=2",
    )
    whole, out = tmp_path / "whole", tmp_path / "split"
    train(make_cfg(*run, f"loader.batch_size={batch}", f"paths.output_dir={whole}"))
    kill_at_step(monkeypatch, 3)
    with pytest.raises(RuntimeError, match="killed"):
        train(make_cfg(*run, f"loader.batch_size={batch}", f"paths.output_dir={out}"))
    monkeypatch.undo()
    split = (f"loader.batch_size={batch // 2}", "trainer.grad_accum=2", "trainer.resume=auto")
    train(make_cfg(*run, *split, f"paths.output_dir={out}"))
    assert samples_by_step(out) == samples_by_step(whole)


@pytest.mark.parametrize(
    ("first", "then"),
    [(("dataset=mix",), ("dataset=mix", "dataset.sources.folder.weight=0.5"))],
)
def test_another_mix_or_weighted_draw_mid_epoch_is_refused(
    make_cfg, tmp_path, monkeypatch, first, then
) -> None:
    out = tmp_path / "run"
    _killed(make_cfg, monkeypatch, out, "loader.batch_size=8", *first)
    with pytest.raises(ValueError, match="this run draws"):
        train(make_cfg(*RUN, "loader.batch_size=8", *then, f"trainer.resume={out}"))


def test_mix_weights_scaled_alike_are_the_same_draw(make_cfg, tmp_path, monkeypatch) -> None:
    out = tmp_path / "run"
    _killed(make_cfg, monkeypatch, out, "loader.batch_size=8", "dataset=mix")
    scaled = ("dataset.sources.folder.weight=1.5", "dataset.sources.listed.weight=0.5")
    train(make_cfg(*RUN, "loader.batch_size=8", "dataset=mix", *scaled, f"trainer.resume={out}"))
