"""Elastic resume, on the reference project: a mid-epoch checkpoint goes on with another split
of the same global batch (batch size, accumulation, loader workers) and trains the very same
samples in every remaining step; a changed global batch, changed data or another order is
refused in one line; samples.csv records which samples each step trained on, across the resume
(one process here; other world sizes: process/test_elastic_ranks.py)."""

from __future__ import annotations

import csv
import logging
import os
import shutil
from pathlib import Path

import pytest
import torch

from engine.runs.checkpoint_files import save_checkpoint
from engine_dev.api import load_checkpoint, samples_by_step, uses_by_epoch
from engine_dev.fixtures import assert_each_once
from reference.loop import train
from tests.interrupts import kill_at_step

# 48 demo train images, batch 8: 6 steps an epoch, 12 in 2 epochs; TinyNet has no dropout and
# no BatchNorm, so a different split of a step's samples gives the same numbers up to rounding
RUN = (
    "trainer.max_epochs=2",
    "trainer.record_samples=true",
    "trainer.checkpoint.every_n_steps=2",
)
KILLED_AT = 9  # epoch 2, batch 3: the last checkpoint is step 8's, mid-epoch 2


@pytest.fixture
def uninterrupted(reference_cfg) -> tuple[Path, dict[str, float]]:
    cfg = reference_cfg("whole", *RUN, "loader.batch_size=8")
    return Path(cfg.paths.output_dir), train(cfg)


def _killed(reference_cfg, monkeypatch, name: str, *overrides: str) -> Path:
    """The run dir of run `name`, killed after step KILLED_AT."""
    kill_at_step(monkeypatch, KILLED_AT)
    cfg = reference_cfg(name, *RUN, *overrides)
    with pytest.raises(RuntimeError, match="killed"):
        train(cfg)
    monkeypatch.undo()
    return Path(cfg.paths.output_dir)


@pytest.mark.parametrize("sampler", ["random", "weighted"])  # weighted: draws repeat
def test_the_global_batch_split_otherwise_trains_the_same_samples_per_step(
    reference_cfg, tmp_path, monkeypatch, sampler
) -> None:
    whole = tmp_path / "whole"
    order = f"sampler={sampler}"
    expected = train(reference_cfg("whole", *RUN, order, "loader.batch_size=8"))
    out = _killed(
        reference_cfg, monkeypatch, "split", order, "loader.batch_size=8", "loader.num_workers=0"
    )
    assert max(samples_by_step(out)) == 8  # the killed steps 9 were never written
    metrics = train(
        reference_cfg(
            "split",
            *RUN,
            "loader.batch_size=4",  # 4 x 2 accumulated = the same 8 samples per step
            "trainer.grad_accum=2",
            "loader.num_workers=2",
            "trainer.resume=auto",
            order,
        )
    )
    assert samples_by_step(out) == samples_by_step(whole)
    if sampler == "random":
        assert_each_once(out)
    assert metrics["val/loss"] == pytest.approx(expected["val/loss"], rel=1e-4)
    state = load_checkpoint(out / "checkpoints" / "last.pt")
    assert state["topology"] == {
        "world_size": 1,
        "num_workers": 2,
        "batch_size": 4,
        "grad_accum": 2,
    }
    kind = {"random": "RandomOrder", "weighted": "WeightedOrder"}[sampler]
    assert state["data"]["size"] == 48 and state["sampler"]["kind"] == kind


def test_every_map_style_kind_resumes_with_another_split_and_records_its_samples(
    reference_cfg, tmp_path, monkeypatch
) -> None:
    """The reference project's CSV listing (the template's suite runs its other map-style
    kinds: tensors, padded sequences, parquet row groups)."""
    run = (
        "dataset=csv",
        "trainer.max_epochs=2",
        "trainer.record_samples=true",
        "trainer.checkpoint.every_n_steps=2",
    )
    whole, out = tmp_path / "whole", tmp_path / "split"
    train(reference_cfg("whole", *run, "loader.batch_size=8"))
    kill_at_step(monkeypatch, 3)
    with pytest.raises(RuntimeError, match="killed"):
        train(reference_cfg("split", *run, "loader.batch_size=8"))
    monkeypatch.undo()
    split = ("loader.batch_size=4", "trainer.grad_accum=2", "trainer.resume=auto")
    train(reference_cfg("split", *run, *split))
    assert samples_by_step(out) == samples_by_step(whole)


def test_another_global_batch_is_refused_in_one_line(reference_cfg, monkeypatch) -> None:
    out = _killed(reference_cfg, monkeypatch, "run", "loader.batch_size=8")
    with pytest.raises(ValueError) as refused:
        train(reference_cfg("again", *RUN, "loader.batch_size=16", f"trainer.resume={out}"))
    message = str(refused.value)
    assert "\n" not in message and "global batch of 8" in message and "16" in message
    assert "trainer.resume_granularity=sample" in message


def test_sample_granularity_goes_on_from_the_next_unused_sample(
    reference_cfg, tmp_path, monkeypatch, caplog
) -> None:
    out = _killed(reference_cfg, monkeypatch, "run", "loader.batch_size=8")
    with caplog.at_level(logging.WARNING):
        train(
            reference_cfg(
                "resumed",
                *RUN,
                "loader.batch_size=5",
                "loader.drop_last=false",  # (true drops the last short batch, as ever)
                "trainer.resume_granularity=sample",
                f"trainer.resume={out}",
            )
        )
    assert "group the samples differently" in caplog.text
    assert sorted(uses_by_epoch(tmp_path / "resumed")) == [1, 2]
    assert_each_once(tmp_path / "resumed")  # no sample lost or repeated, though steps moved
    steps = samples_by_step(tmp_path / "resumed")
    assert [len(steps[s]) for s in range(9, 16)] == [5] * 6 + [2]  # 32 left after step 8


def _moved_file(tree: Path) -> None:
    """Move one train image of the imagefolder `tree` into another class's folder."""
    first, second = sorted(p for p in (tree / "train").iterdir() if p.is_dir())[:2]
    image = sorted(first.iterdir())[0]
    shutil.move(image, second / image.name)


def _relabelled(listing: Path) -> None:
    """Give the first row of the CSV `listing` the last row's label."""
    lines = listing.read_text().splitlines()
    path, _ = lines[1].rsplit(",", 1)
    lines[1] = f"{path},{lines[-1].rsplit(',', 1)[1]}"
    listing.write_text("\n".join(lines) + "\n")


CHANGES = {  # how the data changed under the checkpoint -> what the refusal says
    "moved": "48 files are not the checkpoint's (renamed, reordered, or some removed",
    "added": "49 samples, the checkpoint's 48 (1 added)",
    "relabelled": "the checkpoint's, but their labels differ (relabelled)",
}


@pytest.mark.parametrize("change", list(CHANGES))
def test_a_mid_epoch_resume_on_changed_data_is_refused_naming_the_change(
    reference_cfg, demo_dir, tmp_path, monkeypatch, change
) -> None:
    data = tmp_path / "data"
    shutil.copytree(demo_dir / "imagefolder", data / "imagefolder")
    shutil.copy(demo_dir / "train.csv", data / "train.csv")
    source = (
        ("dataset=csv", f"dataset.train_csv={data / 'train.csv'}", f"dataset.root={data}")
        if change == "relabelled"
        else (f"dataset.root={data / 'imagefolder'}",)
    )
    out = _killed(reference_cfg, monkeypatch, "run", "loader.batch_size=8", *source)
    if change == "moved":
        _moved_file(data / "imagefolder")
    elif change == "added":
        circle = data / "imagefolder" / "train" / "circle"
        shutil.copy(sorted(circle.iterdir())[0], circle / "extra.jpg")
    else:
        _relabelled(data / "train.csv")
    with pytest.raises(ValueError) as refused:
        train(reference_cfg("again", *RUN, "loader.batch_size=8", *source, f"trainer.resume={out}"))
    message = str(refused.value)
    assert CHANGES[change] in message and "\n" not in message
    assert "stopped mid-epoch 2 on other data" in message


def test_an_epoch_end_resume_on_changed_data_goes_on_with_a_warning(
    reference_cfg, demo_dir, tmp_path, caplog
) -> None:
    tree = tmp_path / "data" / "imagefolder"
    shutil.copytree(demo_dir / "imagefolder", tree)
    out = tmp_path / "run"
    one = ("loader.batch_size=8", f"dataset.root={tree}")
    train(reference_cfg("run", *RUN, *one, "trainer.max_epochs=1"))
    _moved_file(tree)
    with caplog.at_level(logging.WARNING):
        train(reference_cfg("b", *RUN, *one, f"trainer.resume={out}"))
    assert (
        "not the checkpoint's" in caplog.text
        and "going on with the data as it is now" in caplog.text
    )


def test_another_order_mid_epoch_is_refused(reference_cfg, monkeypatch) -> None:
    out = _killed(reference_cfg, monkeypatch, "run", "loader.batch_size=8")
    again = ("loader.batch_size=8", "trainer.seed=1", f"trainer.resume={out}")
    with pytest.raises(ValueError, match=r"drawing RandomOrder \(seed 0, 48 draws\), this run "):
        train(reference_cfg("again", *RUN, *again))


def test_samples_csv_names_each_sample_and_costs_nothing_when_off(reference_cfg, tmp_path) -> None:
    on, off = tmp_path / "on", tmp_path / "off"
    train(reference_cfg("on", *RUN, "trainer.max_epochs=1", "loader.batch_size=8"))
    with open(on / "samples.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    assert list(rows[0]) == ["epoch", "step", "rank", "source", "index", "path"]
    assert (
        len(rows) == 48
        and {r["rank"] for r in rows} == {"0"}
        and {r["source"] for r in rows} == {""}
    )
    for row in rows[:5]:
        assert Path(row["path"]).is_file() and Path(row["path"]).parent.parent.name == "train"
    train(reference_cfg("off", *RUN, "trainer.max_epochs=1", "trainer.record_samples=false"))
    assert not (off / "samples.csv").exists()


def test_rows_of_the_killed_tail_are_dropped_when_resumed_in_a_new_run_dir(
    reference_cfg, tmp_path, monkeypatch, uninterrupted
) -> None:
    whole, _ = uninterrupted
    first = _killed(reference_cfg, monkeypatch, "first", "loader.batch_size=8")
    torch.manual_seed(0)
    train(reference_cfg("second", *RUN, "loader.batch_size=8", f"trainer.resume={first}"))
    assert samples_by_step(tmp_path / "second") == samples_by_step(whole)


def test_record_samples_leaves_out_unreadable_files_under_skip(
    reference_cfg, demo_dir, tmp_path
) -> None:
    tree = tmp_path / "imagefolder"
    shutil.copytree(demo_dir / "imagefolder", tree)
    bad = sorted((tree / "train" / "star").iterdir())[0]
    bad.write_bytes(b"junk")
    skip = (
        "dataset.decode.on_error=skip",
        "dataset.decode.max_bad_fraction=0.2",
        f"dataset.root={tree}",
    )
    out = tmp_path / "run"
    train(reference_cfg("run", *RUN, *skip, "trainer.max_epochs=1", "loader.batch_size=8"))
    with open(out / "samples.csv", newline="") as f:
        paths = [row["path"] for row in csv.DictReader(f)]
    assert len(paths) == 47 and str(bad) not in paths


def test_a_checkpoint_without_the_record_replays_only_its_own_batches(
    reference_cfg, monkeypatch
) -> None:
    """An older engine's mid-epoch checkpoint (no topology, no samples_done) is replayed batch
    by batch: another split of its global batch would replay other samples, so is refused."""
    out = _killed(reference_cfg, monkeypatch, "run", "loader.batch_size=8")
    last = out / "checkpoints" / "last.pt"
    old = {
        k: v
        for k, v in load_checkpoint(last).items()
        if k not in ("topology", "sampler", "data", "samples_done")
    }
    save_checkpoint(last, old)
    split = ("loader.batch_size=4", "trainer.grad_accum=2", f"trainer.resume={last}")
    with pytest.raises(ValueError, match=r"loader\.batch_size 8 x trainer\.grad_accum 1, this one"):
        train(reference_cfg("split", *RUN, *split))
    train(reference_cfg("run", *RUN, "loader.batch_size=8", f"trainer.resume={last}"))
    assert_each_once(out)


def test_limit_train_batches_with_another_split_is_refused(
    reference_cfg, tmp_path, monkeypatch
) -> None:
    limit = "trainer.limit_train_batches=5"
    out = _killed(reference_cfg, monkeypatch, "run", "loader.batch_size=8", limit)
    split = ("loader.batch_size=4", "trainer.grad_accum=2", limit, f"trainer.resume={out}")
    with pytest.raises(ValueError, match=r"cut after 40 samples .* this run cuts them after 20"):
        train(reference_cfg("split", *RUN, *split))
    same_cut = ("loader.batch_size=4", "trainer.grad_accum=2", "trainer.limit_train_batches=10")
    train(reference_cfg("run", *RUN, *same_cut, f"trainer.resume={out}"))
    whole = tmp_path / "whole"
    train(reference_cfg("whole", *RUN, "loader.batch_size=8", limit))
    assert samples_by_step(out) == samples_by_step(whole)


def test_another_mix_or_weighted_draw_mid_epoch_is_refused(reference_cfg, monkeypatch) -> None:
    """Another weighted draw (the template's suite runs another mix of its dataset=mix)."""
    out = _killed(reference_cfg, monkeypatch, "run", "loader.batch_size=8", "sampler=weighted")
    then = ("sampler=weighted", "sampler.replacement=false", f"trainer.resume={out}")
    with pytest.raises(ValueError, match="this run draws"):
        train(reference_cfg("again", *RUN, "loader.batch_size=8", *then))


def test_data_staged_to_another_folder_resumes_mid_epoch(
    reference_cfg, demo_dir, tmp_path, monkeypatch
) -> None:
    """A requeued job that copies its data into its own $TMPDIR reads the same listing."""
    first, second = tmp_path / "a" / "imagefolder", tmp_path / "b" / "imagefolder"
    shutil.copytree(demo_dir / "imagefolder", first)
    shutil.copytree(demo_dir / "imagefolder", second)
    out = _killed(reference_cfg, monkeypatch, "run", "loader.batch_size=8", f"dataset.root={first}")
    again = ("loader.batch_size=8", f"dataset.root={second}", f"trainer.resume={out}")
    train(reference_cfg("run", *RUN, *again))
    assert_each_once(out)


def test_samples_csv_keeps_names_that_are_not_utf8_across_a_resume(
    reference_cfg, demo_dir, tmp_path, monkeypatch
) -> None:
    tree = tmp_path / "imagefolder"
    shutil.copytree(demo_dir / "imagefolder", tree)
    star = sorted((tree / "train" / "star").iterdir())[0]
    odd = os.fsencode(star.parent) + b"/caf\xe9.jpg"
    os.rename(star, odd)
    out = _killed(reference_cfg, monkeypatch, "run", "loader.batch_size=8", f"dataset.root={tree}")
    again = ("loader.batch_size=8", f"dataset.root={tree}", f"trainer.resume={out}")
    train(reference_cfg("run", *RUN, *again))
    data = (out / "samples.csv").read_bytes()
    assert data.count(b"caf\xe9.jpg") == 2  # once an epoch, byte for byte


def test_samples_csv_keeps_names_with_line_breaks_across_a_resume(
    reference_cfg, demo_dir, tmp_path, monkeypatch
) -> None:
    """File names holding \\n or \\r are written quoted and read back whole: the mid-epoch
    resume of that very run goes on (it failed reading its own samples.csv)."""
    tree = tmp_path / "imagefolder"
    shutil.copytree(demo_dir / "imagefolder", tree)
    first, second = sorted((tree / "train" / "star").iterdir())[:2]
    first.rename(first.with_name("two\nlines.jpg"))
    second.rename(second.with_name("car\rriage.jpg"))
    out = _killed(reference_cfg, monkeypatch, "run", "loader.batch_size=8", f"dataset.root={tree}")
    again = ("loader.batch_size=8", f"dataset.root={tree}", f"trainer.resume={out}")
    train(reference_cfg("run", *RUN, *again))
    assert_each_once(out)
    with open(out / "samples.csv", newline="") as f:
        names = [Path(row["path"]).name for row in csv.DictReader(f)]
    assert names.count("two\nlines.jpg") == 2 and names.count("car\rriage.jpg") == 2
