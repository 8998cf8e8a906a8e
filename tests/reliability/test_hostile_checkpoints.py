"""Checkpoints from elsewhere (mode=eval, mode=predict, load_model) carry their own config: one
that would run a command (`pipe:` sources) or resolve an interpolation (a resolver reads the
environment or writes files) is refused in one line naming the file and the key, and nothing
in it runs."""

from __future__ import annotations

import zipfile
from pathlib import Path

import pytest

from engine.inference import load_model
from engine.modes.evaluation import evaluate_checkpoint
from engine.runs.checkpoint_files import CheckpointError, load_checkpoint, save_checkpoint
from src.loop import train
from tests.conftest import NARROW_MODEL, compose_config

ONE_STEP = ("trainer.max_epochs=1", "trainer.limit_train_batches=1", "trainer.limit_val_batches=1")


@pytest.fixture(scope="module")
def checkpoint(demo_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> dict:
    """The state of a checkpoint train.py wrote (one step on the tiny demo set)."""
    run = tmp_path_factory.mktemp("trained") / "run"
    train(compose_config(demo_dir, run, NARROW_MODEL, *ONE_STEP))
    return load_checkpoint(run / "checkpoints" / "last.pt")


def _hostile(checkpoint: dict, tmp_path: Path, **sections: dict) -> Path:
    state = {**checkpoint, "config": {**checkpoint["config"], **sections}}
    save_checkpoint(tmp_path / "hostile.pt", state)
    return tmp_path / "hostile.pt"


def _evaluate(demo_dir, tmp_path, monkeypatch, file: Path, *overrides: str) -> dict:
    args = ("mode=eval", f"eval.checkpoint={file}", *overrides)
    monkeypatch.setattr("engine.inference.session.task_overrides", lambda: list(args))
    return evaluate_checkpoint(compose_config(demo_dir, tmp_path / "out", NARROW_MODEL, *args))


def test_a_saved_pipe_source_never_runs(checkpoint, demo_dir, tmp_path, monkeypatch) -> None:
    sentinel = tmp_path / "SENTINEL"
    dataset = {
        "_target_": "engine.data.datasets.tar_shards.TarShardDataset",
        "train_shards": [f"pi{{pe,pe}}:touch {sentinel}"],  # a pipe: once brace-expanded
        "val_shards": f"pipe:touch {sentinel}",
        "manifest": None,
    }
    file = _hostile(checkpoint, tmp_path, dataset=dataset)
    message = rf"^{file}: its saved config sets dataset.train_shards\[0\]='pi\{{pe,pe\}}:touch "
    with pytest.raises(CheckpointError, match=message):
        _evaluate(demo_dir, tmp_path, monkeypatch, file)
    assert not sentinel.exists()
    # the command line's own dataset replaces the saved one: nothing is refused
    results = _evaluate(demo_dir, tmp_path, monkeypatch, file, "dataset=imagefolder")
    assert "val/acc" in results and not sentinel.exists()


@pytest.mark.parametrize("entry", ["eval", "load_model"])
def test_a_saved_interpolation_is_never_resolved(
    checkpoint, demo_dir, tmp_path, monkeypatch, entry
) -> None:
    made = tmp_path / "made" / "by" / "a" / "resolver"
    transforms = {**checkpoint["config"]["transforms"], "mean": f"${{run_log:{made}/x.log}}"}
    file = _hostile(checkpoint, tmp_path, transforms=transforms)
    message = rf"^{file}: its saved config holds an interpolation, transforms.mean="
    with pytest.raises(CheckpointError, match=message):
        if entry == "eval":
            _evaluate(demo_dir, tmp_path, monkeypatch, file)
        else:
            load_model(file)
    assert not (tmp_path / "made").exists()


def _config_with(checkpoint: dict, **model: object) -> dict:
    return {**checkpoint["config"], "model": {**checkpoint["config"]["model"], **model}}


@pytest.mark.parametrize(
    ("case", "message"),
    [
        ("target_in_a_tuple", r"its saved config is refused: model.widths\[0\]._target_="),
        ("interpolation_in_a_tuple", r"its saved config holds an interpolation, model.widths\[0\]"),
        ("shared_list_bomb", r"its saved config holds more than 1,000,000 values"),
        ("classes_one_per_output", r"its saved data.classes must be distinct names, one per"),
        ("integer_weights", r"its weight .* is torch.int64, the model's is torch.float32"),
        ("partial_model", r"its saved model config is not a model's node"),
    ],
)
def test_a_hostile_saved_config_or_weights_are_one_line_and_nothing_runs(
    checkpoint, tmp_path, case, message
) -> None:
    sentinel = tmp_path / "SENTINEL"
    state = dict(checkpoint)
    if case == "target_in_a_tuple":  # a tuple was walked by no check, then built by Hydra
        node = {"_target_": "engine.core.io.write_json", "path": str(sentinel), "obj": 1}
        state["config"] = _config_with(checkpoint, widths=(node, 16))
    elif case == "interpolation_in_a_tuple":
        state["config"] = _config_with(checkpoint, widths=("${oc.env:HOME}", 16))
    elif case == "shared_list_bomb":  # 3.5 MB on disk, 10^10 values once walked
        bomb: list = [0]
        for _ in range(10):
            bomb = [bomb] * 10
        state["config"] = {**checkpoint["config"], "extra": bomb}
    elif case == "classes_one_per_output":
        state["config"] = {**checkpoint["config"], "data": {"classes": [str(i) for i in range(50)]}}
    elif case == "integer_weights":
        state["model"] = {k: v.long() for k, v in checkpoint["model"].items()}
    else:
        state["config"] = _config_with(checkpoint, _partial_=True)
    save_checkpoint(tmp_path / "hostile.pt", state)
    with pytest.raises(CheckpointError, match=rf"^{tmp_path / 'hostile.pt'}: {message}"):
        load_model(tmp_path / "hostile.pt")
    assert not sentinel.exists()


def test_compressed_or_foreign_files_are_one_line(checkpoint, tmp_path) -> None:
    """torch.load inflates a compressed member before any check (a 6 MB file asked 3.9 GB)."""
    plain = tmp_path / "plain.pt"
    save_checkpoint(plain, checkpoint)
    packed = tmp_path / "packed.pt"
    with (
        zipfile.ZipFile(plain) as source,
        zipfile.ZipFile(packed, "w", zipfile.ZIP_DEFLATED) as out,
    ):
        for member in source.infolist():
            out.writestr(member.filename, source.read(member))
    with pytest.raises(CheckpointError, match=rf"^{packed} holds compressed members"):
        load_model(packed)
    text = tmp_path / "notes.pt"
    text.write_text("just some text\n")
    with pytest.raises(CheckpointError, match=rf"^{text} is truncated or corrupt"):
        load_model(text)
