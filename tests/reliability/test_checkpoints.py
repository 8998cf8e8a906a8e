"""Checkpoint files: atomic, last N + best kept, unsafe or broken files refused with a fallback."""

from __future__ import annotations

import os
import pickle
import random
from pathlib import Path

import numpy as np
import pytest
import torch

from src.training.checkpoint import CheckpointError, Checkpoints, load_checkpoint, load_newest
from src.training.resume import KEY_FILE, find_resume_state
from src.utils.seeding import restore_rng_states, rng_states


def _manager(tmp_path: Path, keep: int = 2) -> Checkpoints:
    return Checkpoints(tmp_path, keep_last=keep, monitor="val/acc", mode="max")


def test_keeps_the_last_n_and_the_best(tmp_path: Path) -> None:
    ckpt = _manager(tmp_path)
    for step, acc in [(1, 0.5), (2, 0.9), (3, 0.7), (4, None), (5, 0.6)]:
        ckpt.save({"step": step, "w": torch.tensor(float(step))},
                  None if acc is None else {"val/acc": acc})  # fmt: skip
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


def test_resume_auto_picks_the_newest_run_of_the_same_config(tmp_path: Path) -> None:
    for name, key, step in [("old", "k1", 5), ("new", "k1", 7), ("other", "k2", 9)]:
        folder = tmp_path / name / "checkpoints"
        _manager(folder).save({"step": step})
        (folder / KEY_FILE).write_text(f"{key}\n")
        os.utime(folder / f"step{step:08d}.pt", (step, step))  # mtimes in step order
    path, state = find_resume_state("auto", "k1", tmp_path, run_dir=tmp_path / "current")
    assert state["step"] == 7 and path.parent.parent.name == "new"
    assert find_resume_state("auto", "k3", tmp_path, run_dir=tmp_path / "x") is None
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
