"""The engine's guarantees end to end, on its reference project alone (reference_project/):
a run trains and its checkpoint evaluates from the command line; a run stopped mid-epoch
(random or weighted order, 0 or 2 workers) resumes to exactly the uninterrupted run's weights,
metrics and the step's own state (an EMA), also past another config's and a malformed newest
step in its own folder, which it skips; a folder with several unreadable files trains under
on_error=skip and names each, or stops at the first naming it; a NaN loss is skipped when
allowed and stops the run naming the key when not. (More of stopping and resuming:
test_resume.py.)"""

from __future__ import annotations

import csv
import logging
import math
import re
import shutil
import signal
from pathlib import Path

import pytest
import torch

from engine.runs.checkpoint_files import load_checkpoint, save_checkpoint
from engine_dev.cli import run_script
from engine_dev.hostile import corrupt_tree
from reference.loop import train
from reference.step import EmaStep
from tests.conftest import TRAIN, reference_args
from tests.interrupts import stop_at_step

NAMED = r"cannot decode sample (\d+) \(class '(circle|cross|square)'\) from (\S+):"


def _last(run: Path) -> dict:
    return load_checkpoint(run / "checkpoints" / "last.pt")


def test_the_reference_project_trains_then_evaluates_its_checkpoint(demo_dir, tmp_path):
    trained = run_script(TRAIN, *reference_args(demo_dir, tmp_path), cwd=tmp_path)
    assert trained.returncode == 0, trained.stderr[-3000:]
    (metrics,) = tmp_path.glob("runs/*/*/metrics.json")
    assert (metrics.parent / "metrics.csv").is_file()  # logger=csv
    evaluated = run_script(
        TRAIN,
        *reference_args(demo_dir, tmp_path, "mode=eval", "eval.checkpoint=latest"),
        cwd=tmp_path,
    )
    assert evaluated.returncode == 0, evaluated.stderr[-3000:]
    assert "val/loss" in evaluated.stdout + evaluated.stderr


@pytest.mark.parametrize(
    ("sampler", "workers"), [("random", 0), ("random", 2), ("weighted", 0), ("weighted", 2)]
)
def test_a_stopped_run_resumes_to_the_uninterrupted_weights_and_ema(
    reference_cfg,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    sampler: str,
    workers: int,
) -> None:
    # 48 train images / batch 16: 3 steps an epoch, 9 in all; stopped after step 4 (epoch 2)
    knobs = (f"sampler={sampler}", f"loader.num_workers={workers}")
    whole = train(reference_cfg("whole", *knobs))
    stop_at_step(monkeypatch, 4, signal.SIGTERM)
    with pytest.raises(SystemExit) as stopped:
        train(reference_cfg("first", *knobs))
    assert stopped.value.code == 128 + signal.SIGTERM
    del stopped  # its traceback holds the stopped run's loaders: their workers end now
    first = reference_cfg("first").paths.output_dir
    saved = _last(Path(first))
    assert (saved["epoch"], saved["batches_done"], saved["step"]) == (2, 1, 4)
    assert not (Path(first) / "metrics.json").exists()
    monkeypatch.undo()
    with caplog.at_level(logging.INFO, logger="engine"):
        resumed = train(reference_cfg("second", *knobs, "trainer.resume=auto"))
    said = f"resumed from {Path(first) / 'checkpoints'}"
    assert any(said in m and m.endswith("epoch 2, batch 1") for m in caplog.messages)
    a, b = (_last(Path(reference_cfg(name).paths.output_dir)) for name in ("whole", "second"))
    assert all(torch.equal(a["model"][k], b["model"][k]) for k in a["model"])
    momenta = (a["optimizer"]["state"], b["optimizer"]["state"])
    assert momenta[0].keys() == momenta[1].keys() and momenta[0], "no optimizer state saved"
    for k in momenta[0]:
        assert torch.equal(momenta[0][k]["momentum_buffer"], momenta[1][k]["momentum_buffer"])
    ema_a, ema_b = a["train_step"]["ema"], b["train_step"]["ema"]
    assert int(ema_b["n_averaged"]) == 9
    assert all(torch.equal(ema_a[k], ema_b[k]) for k in ema_a), "EMA weights differ"
    for key in ("val/loss", "train/loss", "epochs"):
        assert resumed[key] == whole[key], key


def test_resume_auto_in_its_own_folder_skips_another_configs_and_malformed_steps(
    reference_cfg, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """A requeued run (the same run dir) whose newest steps are another config's (other
    weights) and one lacking keys: each skipped in one line naming it, the step before
    continued to the uninterrupted run's weights, and the skipped files set aside, not lost,
    when the run writes its own steps of those numbers."""
    every = ("trainer.checkpoint.every_n_steps=1",)
    whole = train(reference_cfg("whole", *every))
    stop_at_step(monkeypatch, 3, signal.SIGTERM)
    with pytest.raises(SystemExit):
        train(reference_cfg("run", *every))
    monkeypatch.undo()
    run = Path(reference_cfg("run").paths.output_dir) / "checkpoints"
    good = load_checkpoint(run / "step00000003.pt")
    layer = next(iter(good["model"]))
    other = good | {
        "config_key": "0123456789abcdef",
        "step": 4,
        "model": good["model"] | {layer: torch.zeros(3, 1)},
    }
    foreign, malformed = run / "step00000004.pt", run / "step00000005.pt"
    save_checkpoint(foreign, other)
    save_checkpoint(malformed, {k: v for k, v in good.items() if k != "batches_done"} | {"step": 5})
    with caplog.at_level(logging.INFO, logger="engine"):
        again = train(reference_cfg("run", *every, "trainer.resume=auto"))
    said = "\n".join(caplog.messages)
    assert f"skipping checkpoint: {foreign} comes from another config (config_key 0123" in said
    assert f"skipping checkpoint: {malformed} is not a training checkpoint" in said
    assert "lacks ['batches_done']" in said
    assert f"resumed from {run}/step00000003.pt" in said
    a, b = _last(run.parent), _last(Path(reference_cfg("whole").paths.output_dir))
    assert all(torch.equal(a["model"][k], b["model"][k]) for k in a["model"])
    assert again["val/loss"] == whole["val/loss"]
    aside = sorted(p.name for p in run.glob("*.set-aside"))
    assert aside == [f"{foreign.name}.set-aside", f"{malformed.name}.set-aside"]
    assert load_checkpoint(run / aside[0])["config_key"] == "0123456789abcdef"


def test_several_unreadable_files_are_skipped_and_each_named(
    demo_dir, reference_cfg, tmp_path, caplog
):
    """on_error=skip trains to the end; bad_samples.csv lists each bad file once across the
    epochs, with its split and error, and the log warns once per file."""
    root, bad = corrupt_tree(demo_dir, tmp_path / "tree")
    cfg = reference_cfg(
        "skip",
        f"dataset.root={root}",
        "dataset.decode.on_error=skip",
        "dataset.decode.max_bad_fraction=0.1",
        "trainer.max_epochs=2",
    )
    with caplog.at_level(logging.WARNING, logger="engine.data.bad_samples"):
        metrics = train(cfg)
    assert metrics["epochs"] == 2
    with open(tmp_path / "skip" / "bad_samples.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    assert sorted(r["path"] for r in rows) == sorted(bad)  # each once, across both epochs
    assert {r["split"] for r in rows} == {"train"} and all(r["error"] for r in rows)
    warned = [r.getMessage() for r in caplog.records if "left out" in r.getMessage()]
    assert len(warned) == 3 and all(any(p in w for p in bad) for w in warned)


def test_a_run_resumed_past_left_out_batches_trains_as_the_uninterrupted_one(
    demo_dir, reference_cfg, tmp_path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Under on_error=skip a batch whose every sample is unreadable is left out, and keeps its
    place: resumed after it, the accumulation groups (trainer.grad_accum) and
    trainer.limit_train_batches count as in the uninterrupted run, to the same weights."""
    root = Path(shutil.copytree(demo_dir / "imagefolder", tmp_path / "tree"))
    for folder in sorted(p for p in (root / "train").iterdir() if p.is_dir())[:3]:
        for image in folder.iterdir():
            image.write_bytes(b"")  # two thirds of the train split: many batches all bad
    knobs = (
        f"dataset.root={root}",
        "dataset.decode.on_error=skip",
        "dataset.decode.max_bad_fraction=0.8",
        "loader.batch_size=2",
        "trainer.grad_accum=2",
        "trainer.limit_train_batches=14",
        "trainer.max_epochs=1",
        "trainer.checkpoint.every_n_steps=1",
    )
    train(reference_cfg("whole", *knobs))
    stop_at_step(monkeypatch, 3, signal.SIGTERM)
    with pytest.raises(SystemExit):
        train(reference_cfg("first", *knobs))
    monkeypatch.undo()
    stopped = _last(Path(reference_cfg("first").paths.output_dir))
    assert stopped["batches_done"] > 2 * 3, "no batch was left out before the stop"
    train(reference_cfg("first", *knobs, "trainer.resume=auto"))
    a, b = (_last(Path(reference_cfg(name).paths.output_dir)) for name in ("whole", "first"))
    assert a["step"] == b["step"]
    assert all(torch.equal(a["model"][k], b["model"][k]) for k in a["model"])


def test_the_first_unreadable_file_stops_the_run_naming_it(demo_dir, tmp_path):
    root, bad = corrupt_tree(demo_dir, tmp_path / "tree")
    args = reference_args(demo_dir, tmp_path, f"dataset.root={root}", "trainer.max_epochs=1")
    result = run_script(TRAIN, *args, cwd=tmp_path)
    assert result.returncode == 1
    said = result.stdout + result.stderr
    assert "Traceback" not in said
    named = re.search(NAMED, said)  # the file, its index and class
    assert named and named.group(3) in bad, said[-2000:]
    assert re.search(r"truncated|empty \(0 bytes\)|Unsupported image file", said)  # the error
    assert "dataset.decode.on_error=skip" in said


def _nan_at_step(monkeypatch: pytest.MonkeyPatch, step: int) -> None:
    """The train loss of the batch after optimizer step `step` is NaN."""
    original = EmaStep.forward

    def forward(self: EmaStep, batch):  # type: ignore[no-untyped-def]
        loss, logits = original(self, batch)
        return (loss * float("nan") if self.steps == step else loss), logits

    monkeypatch.setattr(EmaStep, "forward", forward)


def test_a_nan_loss_is_skipped_when_allowed(reference_cfg, monkeypatch, caplog) -> None:
    _nan_at_step(monkeypatch, 2)
    metrics = train(reference_cfg("nan", "trainer.max_nonfinite_steps=1"))
    assert metrics["epochs"] == 3
    assert "step skipped (1 of 1 allowed)" in caplog.text
    assert math.isfinite(metrics["train/loss"])  # the NaN batch was left out of the mean
    weights = load_checkpoint(
        Path(reference_cfg("nan").paths.output_dir) / "checkpoints" / "last.pt"
    )
    assert all(torch.isfinite(tensor).all() for tensor in weights["model"].values())


def test_a_nan_loss_stops_the_run_naming_the_key(reference_cfg, monkeypatch) -> None:
    _nan_at_step(monkeypatch, 2)
    with pytest.raises(
        FloatingPointError, match=r"epoch 1, batch 2 .*trainer\.max_nonfinite_steps=0\)"
    ):
        train(reference_cfg("nan"))  # where, and the key
