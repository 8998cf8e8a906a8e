"""Checkpoint files: atomic, last N + best kept, unsafe or broken files refused with a fallback."""

from __future__ import annotations

import logging
import os
import pickle
import random
import re
from pathlib import Path

import numpy as np
import pytest
import torch
from omegaconf import OmegaConf

from engine.core.seeding import restore_rng_states, rng_states
from engine.runs.checkpoint_checks import RunShape
from engine.runs.checkpoint_files import (
    CheckpointError,
    Checkpoints,
    load_checkpoint,
    load_newest,
    save_checkpoint,
)
from engine.runs.elastic import check_resume
from engine.runs.resume import KEY_FILE, find_resume_state
from engine.runs.run_dir import ResumeError, claim_run_dir


def _manager(tmp_path: Path, keep: int = 2) -> Checkpoints:
    return Checkpoints(tmp_path, keep_last=keep, monitor="val/acc", mode="max")


def _state(step: int, key: str) -> dict:
    """A checkpoint as the trainer writes it (every key `restore` reads), of config `key`,
    for a model of one weight `w` of shape [2] trained with Adam on classes a and b."""
    return {
        "model": {"w": torch.zeros(2)},
        "optimizer": {
            "state": {0: {"step": torch.tensor(1.0), "exp_avg": torch.zeros(2)}},
            "param_groups": [{"params": [0], "lr": 0.1}],
        },
        "scheduler": {},
        "scaler": None,
        "epoch": 1,
        "batches_done": None,
        "step": step,
        "nonfinite": 0,
        "window": (torch.zeros(()), 0),
        "history": [],
        "ranks": [{"rng": {}, "totals": None}],
        "best": None,
        "config_key": key,
        "classes": ["a", "b"],
    }


def test_keeps_the_last_n_and_the_best(tmp_path: Path) -> None:
    ckpt = _manager(tmp_path)
    for step, acc in [(1, 0.5), (2, 0.9), (3, 0.7), (4, None), (5, 0.6)]:
        ckpt.save(
            {"step": step, "w": torch.tensor(float(step))},
            None if acc is None else {"val/acc": acc},
        )
    assert [p.name for p in ckpt.history()] == ["step00000004.pt", "step00000005.pt"]
    assert load_checkpoint(tmp_path / "last.pt")["step"] == 5
    best = load_checkpoint(tmp_path / "best.pt")
    assert best["step"] == 2 and best["best"] == 0.9  # its file was pruned, best.pt remains
    assert not list(tmp_path.glob(".*tmp"))  # no temp file left behind


def test_monitor_that_is_not_a_metric_names_the_key(tmp_path: Path) -> None:
    with pytest.raises(KeyError, match=r"trainer\.checkpoint\.monitor='val/acc'"):
        _manager(tmp_path).save({"step": 1}, {"val/loss": 1.0})


class _Exploit:
    """Unpickling this runs `touch <sentinel>`: what a malicious checkpoint would do."""

    def __init__(self, sentinel: Path) -> None:
        self.sentinel = sentinel

    def __reduce__(self):
        return (os.system, (f"touch {self.sentinel}",))


@pytest.mark.filterwarnings("ignore:Detected pickle protocol")  # the raw-pickle case
@pytest.mark.parametrize("as_torch_file", [True, False])
def test_a_malicious_pickle_is_refused_and_never_runs(tmp_path: Path, as_torch_file: bool):
    sentinel, path = tmp_path / "PWNED", tmp_path / "step00000001.pt"
    payload = {"model": {}, "step": 1, "evil": _Exploit(sentinel)}
    if as_torch_file:
        torch.save(payload, path)
    else:
        path.write_bytes(pickle.dumps(payload))
    with pytest.raises(CheckpointError, match=r"refused.*nothing in it ran"):
        load_checkpoint(path)
    assert not sentinel.exists()


def test_empty_and_truncated_files_fall_back_to_the_previous_one(tmp_path: Path, caplog):
    ckpt = _manager(tmp_path, keep=3)
    for step in (1, 2, 3):
        ckpt.save({"step": step})
    data = (tmp_path / "step00000002.pt").read_bytes()
    (tmp_path / "step00000002.pt").write_bytes(data[: len(data) // 2])
    (tmp_path / "step00000003.pt").write_bytes(b"")
    with pytest.raises(CheckpointError, match="empty"):
        load_checkpoint(tmp_path / "step00000003.pt")
    with pytest.raises(CheckpointError, match="truncated or corrupt"):
        load_checkpoint(tmp_path / "step00000002.pt")
    path, state = load_newest(tmp_path)
    assert path.name == "step00000001.pt" and state["step"] == 1
    assert caplog.text.count("skipping checkpoint") == 2


def test_resume_auto_picks_the_newest_run_of_the_same_config(tmp_path: Path, caplog) -> None:
    """The newest run of this config under the log dir; another config's runs (newer, more
    steps) never: with none of this config, the run starts fresh and says so."""
    for name, key, step in [("old", "k1", 5), ("new", "k1", 7), ("other", "k2", 9)]:
        folder = tmp_path / name / "checkpoints"
        _manager(folder).save(_state(step, key))
        (folder / KEY_FILE).write_text(f"{key}\n")
        os.utime(folder / f"step{step:08d}.pt", (step, step))  # mtimes in step order
    path, state = find_resume_state("auto", "k1", tmp_path, run_dir=tmp_path / "current")
    assert state["step"] == 7 and path.parent.parent.name == "new"
    with caplog.at_level(logging.INFO, logger="engine.runs.resume"):
        assert find_resume_state("auto", "k3", tmp_path, run_dir=tmp_path / "x") is None
    assert "no earlier run of this config" in caplog.text and "starting fresh" in caplog.text
    assert find_resume_state(None, "k1", tmp_path, run_dir=tmp_path / "x") is None
    _, by_dir = find_resume_state(str(tmp_path / "old"), "k1", tmp_path, tmp_path / "x")
    assert by_dir["step"] == 5


def test_rng_states_round_trip_through_a_weights_only_checkpoint(tmp_path: Path) -> None:
    torch.manual_seed(1)
    np.random.seed(2)
    random.seed(3)
    Checkpoints(tmp_path, 1, "val/acc", "max").save({"step": 1, "rng": rng_states()})
    expected = (torch.rand(3), np.random.rand(3), random.random())
    restore_rng_states(load_checkpoint(tmp_path / "last.pt")["rng"])
    again = (torch.rand(3), np.random.rand(3), random.random())
    assert torch.equal(expected[0], again[0]) and np.array_equal(expected[1], again[1])
    assert expected[2] == again[2]


def test_pruning_never_removes_fresh_steps_for_stale_or_foreign_ones(tmp_path: Path) -> None:
    """A folder holding another run's step 3 and step 40: a run writing steps 2, 4, 6, 8 keeps
    its own newest two, never touches the others, and sets the colliding one aside at 40."""
    for step in (3, 40):
        save_checkpoint(tmp_path / f"step{step:08d}.pt", _state(step, "other"))
    ckpt = _manager(tmp_path, keep=2)
    for step in (2, 4, 6, 8):
        ckpt.save(_state(step, "mine"))
    assert [p.name for p in ckpt.history()] == [
        "step00000003.pt",
        "step00000006.pt",
        "step00000008.pt",
        "step00000040.pt",
    ]
    assert load_checkpoint(tmp_path / "step00000003.pt")["config_key"] == "other"
    ckpt.save(_state(40, "mine"))
    assert load_checkpoint(tmp_path / "step00000040.pt")["config_key"] == "mine"
    assert load_checkpoint(tmp_path / "step00000040.pt.set-aside")["config_key"] == "other"
    assert [p.name for p in ckpt.history()] == [
        "step00000003.pt",
        "step00000008.pt",
        "step00000040.pt",
    ]


def test_adopted_steps_of_a_resumed_run_are_pruned_like_its_own(tmp_path: Path) -> None:
    ckpt = _manager(tmp_path, keep=3)
    for step in (6, 7, 8):
        ckpt.save(_state(step, "k"))
    resumed = _manager(tmp_path, keep=3)  # the requeued job, continuing from step 8
    resumed.adopt(resumed.history())
    resumed.save(_state(9, "k"))
    assert [p.name for p in resumed.history()] == [f"step{s:08d}.pt" for s in (7, 8, 9)]


def _run_shape() -> RunShape:
    """The run `_state`'s checkpoints fit: its model, optimizer parameters and classes."""
    return RunShape({"w": torch.zeros(2)}, [[(2,)]], ["a", "b"])


def test_resume_auto_falls_back_past_another_configs_and_malformed_steps(tmp_path, caplog):
    """(b) another config's checkpoint, weights of another shape, as the newest step; (c) a
    checkpoint of this config that lacks keys: each skipped in one line naming it."""
    run = tmp_path / "run"
    folder = run / "checkpoints"
    save_checkpoint(folder / "step00000004.pt", _state(4, "k"))
    other = _state(5, "other") | {"model": {"w": torch.zeros(3, 3)}}
    save_checkpoint(folder / "step00000005.pt", other)
    malformed = {k: v for k, v in _state(6, "k").items() if k != "batches_done"}
    save_checkpoint(folder / "step00000006.pt", malformed)
    no_fit = _state(7, "k") | {"model": {"w": torch.zeros(3)}}
    save_checkpoint(folder / "step00000007.pt", no_fit)
    path, state = find_resume_state("auto", "k", tmp_path, run, _run_shape())
    assert path.name == "step00000004.pt" and state["step"] == 4
    skipped = [r.getMessage() for r in caplog.records if "skipping checkpoint" in r.getMessage()]
    assert len(skipped) == 3
    assert (
        "step00000007.pt does not fit this run: its weights do not fit this model (w is [3] in the file, [2] here)"
        in (skipped[0])
    )
    assert "step00000006.pt is not a training checkpoint" in skipped[1]
    assert "lacks ['batches_done']" in skipped[1]
    assert "step00000005.pt comes from another config (config_key other" in skipped[2]


def test_an_unusable_file_given_by_name_is_one_error_naming_it(tmp_path: Path) -> None:
    path = tmp_path / "foreign.pt"
    save_checkpoint(path, _state(5, "other") | {"model": {"w": torch.zeros(3, 3)}})
    with pytest.raises(
        CheckpointError,
        match=rf"^trainer\.resume={path}: this file does not fit this run: its weights do not "
        r"fit this model \(w is \[3, 3\] in the file",
    ):
        find_resume_state(str(path), "k", tmp_path, tmp_path / "run", _run_shape())
    save_checkpoint(path, {"model": {}, "step": 1})
    with pytest.raises(
        CheckpointError,
        match=r"foreign\.pt: this file is not a training ch.*"
        r"lacks \['optimizer'",
    ):
        find_resume_state(str(path), "k", tmp_path, tmp_path / "run", _run_shape())


def _adam_state_of_shape(shape: int) -> dict:
    return {"step": torch.tensor(1.0), "exp_avg": torch.zeros(shape)}


# what a checkpoint records of its run (engine/runs/elastic.py), as the trainer writes it
TOPOLOGY = {"world_size": 1, "num_workers": 0, "batch_size": 8, "grad_accum": 1}
SAMPLER = {"kind": "RandomOrder", "seed": 0, "draws": 48}
DATA = {"size": 48, "files": "0123456789abcdef", "labels": "fedcba9876543210"}
TRAINED = {"epoch": 1, "size": 48, "bits": torch.zeros(6, dtype=torch.uint8), "replayable": True}


# malformed checkpoints of this config that still load with weights_only=True: how each is
# made from a good one, and what the one line naming it says
MALFORMED = {
    "a list": (lambda s: [1, 2, 3], r"holds a list, not a checkpoint"),
    "optimizer state of another shape": (
        lambda s: s | {"optimizer": s["optimizer"] | {"state": {0: _adam_state_of_shape(3)}}},
        r"its optimizer state does not fit this model: exp_avg of parameter 0 is \[3\] in "
        r"the file, the parameter \[2\] here",
    ),
    "epoch a string": (lambda s: s | {"epoch": "2"}, r"its epoch is '2', not an int >= 1"),
    "step a string": (lambda s: s | {"step": "8"}, r"its step is '8', not an int >= 0"),
    "best a string": (lambda s: s | {"best": "x"}, r"its best is 'x', not a finite number or null"),
    "best infinite": (
        lambda s: s | {"best": float("inf")},
        r"its best is inf, not a finite number",
    ),
    "history entry without the epoch's keys": (
        lambda s: s | {"history": [{"val/acc": 0.5}]},
        r"its history holds epochs of other keys than \['train/data_wait_frac'.*alike in every",
    ),
    "history a string": (
        lambda s: s | {"history": "oops"},
        r"its history is 'oops', not a list of objects of numbers",
    ),
    "batches_done negative": (
        lambda s: s | {"batches_done": -7},
        r"its batches_done is -7, not an int >= 0 .* or null",
    ),
    "no ranks": (
        lambda s: s | {"ranks": []},
        r"its ranks is \[\], where a training checkpoint holds one entry per rank",
    ),
    # a step past int64 failed inside TensorBoard once the resumed run logged
    "step past 2**53": (
        lambda s: s | {"step": 2**70},
        r"its step is 1180591620717411303424, not an int >= 0 and <= 9,007,199,254,740,992",
    ),
    "epoch past 2**53": (
        lambda s: s | {"epoch": 2**60},
        r"its epoch is 1152921504606846976, not an int >= 1",
    ),
    "NaN weights": (
        lambda s: s | {"model": {"w": torch.tensor([0.0, float("nan")])}},
        r"its weight w holds NaN or infinite values.*resume from an earlier step",
    ),
    "other classes": (
        lambda s: s | {"classes": ["x", "y"]},
        r"its classes \['x', 'y'\] are not the data's \['a', 'b'\]: it was trained on other data",
    ),
    # what it records of its run and position (engine/runs/run_records.py), forged
    "topology without grad_accum": (
        lambda s: s | {"topology": {k: v for k, v in TOPOLOGY.items() if k != "grad_accum"}},
        r"its topology lacks grad_accum",
    ),
    "topology with a key more": (
        lambda s: s | {"topology": TOPOLOGY | {"rank": 0}},
        r"its topology has fields it never holds: 'rank'",
    ),
    "topology batch_size a string": (
        lambda s: s | {"topology": TOPOLOGY | {"batch_size": "8"}},
        r"its topology.batch_size is '8', not an int >= 1 .* or null",
    ),
    "sampler without its kind": (
        lambda s: s | {"sampler": {"seed": 0, "draws": 48}},
        r"its sampler lacks kind",
    ),
    "sampler sources of two fields": (
        lambda s: s | {"sampler": SAMPLER | {"sources": [["a", 3]]}},
        r"its sampler.sources\[0\] is \['a', 3\], not a list of 3: a string, an int",
    ),
    "data size negative": (
        lambda s: s | {"data": DATA | {"size": -1}},
        r"its data.size is -1, not an int >= 0",
    ),
    "data a list": (
        lambda s: s | {"data": [48]},
        r"its data is \[48\], not an object of size, files, labels",
    ),
    "samples_done negative": (
        lambda s: s | {"batches_done": 2, "samples_done": -1},
        r"its samples_done is -1, not an int >= 0 .* or null",
    ),
    "samples_done a float": (
        lambda s: s | {"batches_done": 2, "samples_done": 16.0},
        r"its samples_done is 16.0, not an int",
    ),
    "samples_done at an epoch's end": (
        lambda s: s | {"samples_done": 16},
        r"its samples_done is 16 at an epoch's end \(batches_done None\)",
    ),
    "stream_trained bits of the wrong length": (
        lambda s: s | {"batches_done": 2, "stream_trained": TRAINED | {"size": 80}},
        r"its stream_trained.bits is a torch.uint8 tensor of shape \[6\], not the 10 uint8 bytes",
    ),
    "stream_trained of another epoch": (
        lambda s: s | {"batches_done": 2, "stream_trained": TRAINED | {"epoch": 3}},
        r"its stream_trained is of epoch 3, .*mid-way \(1\) or None",
    ),
    "world_size zero": (lambda s: s | {"world_size": 0}, r"its world_size is 0, not an int >= 1"),
    "config a string": (lambda s: s | {"config": "x"}, r"its config is 'x', not an object"),
    "config limit_train_batches negative": (
        lambda s: s | {"config": {"trainer": {"limit_train_batches": -3}}},
        r"its config.trainer.limit_train_batches is -3, not an int >= 1 .* or null",
    ),
}


@pytest.mark.parametrize("case", list(MALFORMED))
def test_a_malformed_checkpoint_is_skipped_by_auto_and_named_when_given(tmp_path, caplog, case):
    """The newest step of this config, malformed (loadable, but a key of the wrong type or
    range, an optimizer state that does not fit, other classes): resume=auto skips it in one
    line naming it and what is wrong and takes the step before; given by name, it is one
    CheckpointError saying the same."""
    make, says = MALFORMED[case]
    folder = tmp_path / "run" / "checkpoints"
    save_checkpoint(folder / "step00000004.pt", _state(4, "k"))
    bad = folder / "step00000005.pt"
    save_checkpoint(bad, make(_state(5, "k")))
    path, state = find_resume_state("auto", "k", tmp_path, tmp_path / "run", _run_shape())
    assert path.name == "step00000004.pt" and state["step"] == 4
    skipped = [r.getMessage() for r in caplog.records if "skipping checkpoint" in r.getMessage()]
    assert len(skipped) == 1 and str(bad) in skipped[0]
    assert re.search(says, skipped[0]), skipped[0]
    with pytest.raises(CheckpointError, match=re.escape(str(bad)) + ".*" + says):
        find_resume_state(str(bad), "k", tmp_path, tmp_path / "other", _run_shape())


def test_factored_optimizer_state_fits_its_parameter(tmp_path: Path) -> None:
    """Adafactor keeps row and column statistics, not the parameter's shape: they fit."""
    adafactor = {
        "step": torch.tensor(1.0),
        "row_var": torch.zeros(4, 1),
        "col_var": torch.zeros(1, 3),
    }
    state = _state(1, "k") | {
        "model": {"w": torch.zeros(4, 3)},
        "optimizer": {"state": {0: adafactor}, "param_groups": [{"params": [0]}]},
    }
    save_checkpoint(tmp_path / "ok.pt", state)
    run = RunShape({"w": torch.zeros(4, 3)}, [[(4, 3)]], ["a", "b"])
    assert find_resume_state(str(tmp_path / "ok.pt"), "k", tmp_path, tmp_path / "run", run)


def test_a_run_dir_holding_checkpoints_it_does_not_continue_is_refused(tmp_path: Path) -> None:
    run = tmp_path / "run"
    save_checkpoint(run / "checkpoints" / "step00000040.pt", _state(40, "other"))
    before = sorted(p.name for p in (run / "checkpoints").iterdir())
    refusal = (
        r"checkpoints already holds 1 step checkpoint.*newest step00000040\.pt, of "
        r"another config.*another hydra\.run\.dir"
    )
    with pytest.raises(ResumeError, match=refusal):
        claim_run_dir(run, None, None, "mine", _manager(run / "checkpoints"))
    save_checkpoint(run / "checkpoints" / "step00000041.pt", _state(41, "mine"))
    with pytest.raises(
        ResumeError,
        match=r"of this config\).*continue them with trainer\.resume="
        r"auto, or start over in another hydra\.run\.dir",
    ):
        claim_run_dir(run, None, None, "mine", _manager(run / "checkpoints"))
    assert sorted(p.name for p in (run / "checkpoints").iterdir()) == [*before, "step00000041.pt"]


@pytest.mark.parametrize("config", ["other", "mine"])
def test_a_run_dir_holding_only_best_and_last_is_refused(tmp_path: Path, config: str) -> None:
    """best.pt and last.pt with their step files removed (kept as a run's result): a fresh run
    refuses the folder, naming it and the fix, and leaves both files as they were."""
    folder = tmp_path / "run" / "checkpoints"
    _manager(folder).save(_state(6, config), {"val/acc": 0.5})
    (folder / "step00000006.pt").unlink()
    before = {p.name: p.read_bytes() for p in folder.iterdir()}
    refusal = (
        rf"{folder} already holds last\.pt and best\.pt this run does not continue \(newest "
        rf"last\.pt, of {'another' if config == 'other' else 'this'} config.*start this run in "
        r"another hydra\.run\.dir, or move them away"
    )
    for resume in (None, "auto"):
        with pytest.raises(ResumeError, match=refusal):
            claim_run_dir(tmp_path / "run", resume, None, "mine", _manager(folder))
    assert {p.name: p.read_bytes() for p in folder.iterdir()} == before


def _mid_epoch(**changes: object) -> dict:
    """A checkpoint of step 8, 3 batches into epoch 2 of a 48-sample order, with its record."""
    record = {"topology": TOPOLOGY, "sampler": SAMPLER, "data": DATA}
    return _state(8, "k") | record | {"epoch": 2, "batches_done": 3, "samples_done": 24} | changes


def test_a_forged_record_that_passes_alone_is_refused_against_the_run(tmp_path: Path) -> None:
    """What only this run can tell: samples_done past its epoch's order, and an older
    engine's topology (none recorded) whose saved config gives no batch a job can have."""
    now = {"topology": TOPOLOGY, "sampler": SAMPLER, "data": DATA}
    path = tmp_path / "step00000008.pt"
    check_resume(_mid_epoch(), now, "batch", path)  # as written: goes on
    with pytest.raises(ValueError) as past:
        check_resume(_mid_epoch(samples_done=49), now, "batch", path)
    said = str(past.value)
    assert "\n" not in said and str(path) in said and "samples_done=49, past the 48" in said
    assert "start fresh (trainer.resume=null)" in said
    old = {k: v for k, v in _mid_epoch().items() if k not in ("topology", "samples_done")}
    old["config"] = {"loader": {"batch_size": 0}, "trainer": {"grad_accum": 1}}
    with pytest.raises(
        ValueError, match=r"is malformed: its topology.batch_size is .*, not an int >= 1"
    ):
        check_resume(old, now, "batch", path)


def test_the_trainings_own_model_override_keeps_what_the_data_filled_in() -> None:
    """`mode=eval eval.checkpoint=latest model=mlp` (the training's command line) stopped with
    a raw MissingMandatoryValue: num_classes; the checkpoint's data values fill the node."""
    from engine.inference.checkpoint import run_config

    model = {
        "_target_": "src.models.mlp.MLP",
        "num_classes": "???",
        "input_shape": "???",
        "hidden": 64,
    }
    others = {key: {} for key in ("dataset", "transforms", "loss", "metrics", "loader", "trainer")}
    cfg = OmegaConf.create({"model": model, **others})
    filled = model | {"num_classes": 5, "input_shape": [3, 48, 48], "hidden": 32}
    saved = {"model": filled, **others, "data": {"classes": list("abcde")}}
    merged = run_config(cfg, saved, ["mode=eval", "model=mlp"])
    assert merged.model.num_classes == 5 and list(merged.model.input_shape) == [3, 48, 48]
    assert merged.model.hidden == 64  # what the command line gave stays this run's
