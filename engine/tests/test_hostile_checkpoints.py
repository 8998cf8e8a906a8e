"""Checkpoints from elsewhere (mode=eval, mode=predict, load_model) carry their own config: one
that would run a command (`pipe:` sources) or resolve an interpolation (a resolver reads the
environment or writes files) is refused in one line naming the file and the key, and nothing
in it runs. End to end on the reference project: a checkpoint its loop wrote, made hostile."""

from __future__ import annotations

import logging
import shutil
import socket
import sys
import zipfile
from pathlib import Path

import pytest
import torch
import torchvision
from hydra.errors import InstantiationException
from omegaconf import OmegaConf

from engine.api import load_model
from engine.config.allowlist import shipped_entries
from engine.data.decode import SampleError
from engine.inference.checkpoint import run_config
from engine.modes.evaluation import evaluate_checkpoint
from engine.runs.checkpoint_files import CheckpointError, load_checkpoint, save_checkpoint
from reference.loop import train
from tests.conftest import REFERENCE, compose_reference

ONE_STEP = ("trainer.max_epochs=1", "trainer.limit_train_batches=1", "trainer.limit_val_batches=1")


@pytest.fixture(scope="module")
def checkpoint(demo_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> dict:
    """The state of a checkpoint the reference project's loop wrote (one step on the demo set;
    once for the module)."""
    log_dir = tmp_path_factory.mktemp("trained")
    cfg = compose_reference(demo_dir, log_dir, log_dir / "run", *ONE_STEP)
    train(cfg)
    return load_checkpoint(log_dir / "run" / "checkpoints" / "last.pt")


def _load(file: Path, **kwargs: object) -> torch.nn.Module:
    """load_model of `file` with the reference project's code and allowed targets."""
    return load_model(file, project_root=REFERENCE, **kwargs)


def _hostile(checkpoint: dict, tmp_path: Path, **sections: dict) -> Path:
    state = {**checkpoint, "config": {**checkpoint["config"], **sections}}
    save_checkpoint(tmp_path / "hostile.pt", state)
    return tmp_path / "hostile.pt"


def _evaluate(reference_cfg, monkeypatch, file: Path, *overrides: str) -> dict:
    """mode=eval of checkpoint `file` on the reference project, writing to tmp_path/out;
    `overrides` also stand for the command line's."""
    args = ("mode=eval", f"eval.checkpoint={file}", *overrides)
    monkeypatch.setattr("engine.inference.session.task_overrides", lambda: list(args))
    return evaluate_checkpoint(reference_cfg("out", *args))


def test_a_saved_pipe_source_never_runs(checkpoint, reference_cfg, tmp_path, monkeypatch) -> None:
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
        _evaluate(reference_cfg, monkeypatch, file)
    assert not sentinel.exists()
    # the command line's own dataset replaces the saved one: nothing is refused
    results = _evaluate(reference_cfg, monkeypatch, file, "dataset=imagefolder")
    assert "val/acc" in results and not sentinel.exists()


@pytest.mark.parametrize("entry", ["eval", "load_model"])
def test_a_saved_interpolation_is_never_resolved(
    checkpoint, reference_cfg, tmp_path, monkeypatch, entry
) -> None:
    made = tmp_path / "made" / "by" / "a" / "resolver"
    transforms = {**checkpoint["config"]["transforms"], "mean": f"${{run_log:{made}/x.log}}"}
    file = _hostile(checkpoint, tmp_path, transforms=transforms)
    message = rf"^{file}: its saved config holds an interpolation, transforms.mean="
    with pytest.raises(CheckpointError, match=message):
        if entry == "eval":
            _evaluate(reference_cfg, monkeypatch, file)
        else:
            _load(file)
    assert not (tmp_path / "made").exists()


def _config_with(checkpoint: dict, **model: object) -> dict:
    return {**checkpoint["config"], "model": {**checkpoint["config"]["model"], **model}}


@pytest.mark.parametrize(
    ("case", "message"),
    [
        ("target_in_a_tuple", r"its saved config is refused: model.input_shape\[0\]._target_="),
        (
            "interpolation_in_a_tuple",
            r"its saved config holds an interpolation, model.input_shape\[0\]",
        ),
        ("shared_list_bomb", r"its saved config holds more than 1,000,000 values"),
        ("classes_one_per_output", r"its saved data.classes must be distinct names, one per"),
        ("integer_weights", r"its weight .* is torch.int64, the model's is torch.float32"),
        ("partial_model", r"its saved model config is not a model's node"),
        ("unknown_key", r"its saved config is refused: model.note: unknown key; \S+ takes "),
    ],
)
def test_a_hostile_saved_config_or_weights_are_one_line_and_nothing_runs(
    checkpoint, tmp_path, case, message
) -> None:
    sentinel = tmp_path / "SENTINEL"
    state = dict(checkpoint)
    if case == "target_in_a_tuple":  # a tuple was walked by no check, then built by Hydra
        node = {"_target_": "engine.core.io.write_json", "path": str(sentinel), "obj": 1}
        state["config"] = _config_with(checkpoint, input_shape=(node, 32, 32))
    elif case == "interpolation_in_a_tuple":
        state["config"] = _config_with(checkpoint, input_shape=("${oc.env:HOME}", 32, 32))
    elif case == "shared_list_bomb":  # 3.5 MB on disk, 10^10 values once walked
        bomb: list = [0]
        for _ in range(10):
            bomb = [bomb] * 10
        state["config"] = {**checkpoint["config"], "extra": bomb}
    elif case == "classes_one_per_output":
        state["config"] = {**checkpoint["config"], "data": {"classes": [str(i) for i in range(50)]}}
    elif case == "integer_weights":
        state["model"] = {k: v.long() for k, v in checkpoint["model"].items()}
    elif case == "unknown_key":  # was Hydra's two-line InstantiationException, no file named
        state["config"] = _config_with(checkpoint, note="x")
    else:
        state["config"] = _config_with(checkpoint, _partial_=True)
    save_checkpoint(tmp_path / "hostile.pt", state)
    with pytest.raises(CheckpointError, match=rf"^{tmp_path / 'hostile.pt'}: {message}"):
        _load(tmp_path / "hostile.pt")
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
        _load(packed)
    text = tmp_path / "notes.pt"
    text.write_text("just some text\n")
    with pytest.raises(CheckpointError, match=rf"^{text} is truncated or corrupt"):
        _load(text)


@pytest.fixture
def offline(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """No connection leaves this process: each attempt is recorded, then fails at once (and
    torch's weight cache is empty, so a download would have to connect)."""
    reached: list[str] = []

    def refuse(*args: object, **kwargs: object) -> None:
        reached.append(repr(args[:2]))
        raise OSError("the network is off in this test")

    monkeypatch.setattr(socket, "getaddrinfo", refuse)
    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setenv("TORCH_HOME", str(tmp_path / "torch_home"))
    return reached


@pytest.mark.parametrize("section", ["transforms", "model"])
def test_load_model_never_runs_a_saved_pipe_source(checkpoint, demo_dir, tmp_path, section) -> None:
    """Hydra builds every node under the saved model and transforms: a shard dataset hidden
    there ran its manifest's pipe: command in load_model (mode=eval refused it)."""
    sentinel = tmp_path / "SENTINEL"
    shards = {
        "_target_": "engine.data.datasets.tar_shards.TarShardDataset",
        "split": "train",
        "train_shards": str(demo_dir / "shards" / "train-000000.tar"),
        "val_shards": str(demo_dir / "shards" / "val-000000.tar"),
        "manifest": f"pipe:touch {sentinel}",
    }
    saved = checkpoint["config"][section]
    node = {**saved, "train": [shards]} if section == "transforms" else {**saved, "extra": shards}
    file = _hostile(checkpoint, tmp_path, **{section: node})
    key = r"transforms\.train\[0\]" if section == "transforms" else r"model\.extra"
    with pytest.raises(CheckpointError, match=rf"^{file}: its saved config sets {key}\.manifest="):
        _load(file)
    assert not sentinel.exists()


def test_load_model_takes_no_code_from_the_checkpoints_saved_root(
    checkpoint, tmp_path, monkeypatch, caplog
) -> None:
    """The checkpoint names its model's class; the code comes from the project the user points
    at (here the working directory's: the reference project), never from the folder its saved
    paths.root_dir names, which load_model put first on sys.path (a fresh process imported its
    src/models: tests/process/test_load_model_processes.py); their disagreeing is one warning
    naming both."""
    elsewhere = tmp_path / "elsewhere"
    (elsewhere / "conf").mkdir(parents=True)
    shutil.copy(REFERENCE / "conf" / "config.yaml", elsewhere / "conf")
    paths = {**checkpoint["config"]["paths"], "root_dir": str(elsewhere)}
    file = _hostile(checkpoint, tmp_path, paths=paths)
    monkeypatch.chdir(REFERENCE)
    monkeypatch.delenv("PROJECT_ROOT", raising=False)
    monkeypatch.setattr(sys, "path", list(sys.path))
    with caplog.at_level(logging.WARNING):
        model = load_model(file)
    assert model.classes == checkpoint["config"]["data"]["classes"]
    assert str(elsewhere) not in sys.path
    warned = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warned) == 1 and str(elsewhere) in warned[0] and str(REFERENCE) in warned[0], warned


@pytest.mark.parametrize(
    ("pattern", "says"),
    [
        ("{{0..999},pi}pe:touch SENTINEL", r"a pipe: source"),  # its 1001st name runs it
        ("x" + "{0..9}" * 12 + ".tar", r"expands to more than 100,000 names"),  # 10**12 names
    ],
)
def test_a_saved_brace_pattern_is_checked_by_its_expansion_within_a_bound(
    checkpoint, reference_cfg, tmp_path, monkeypatch, pattern, says
) -> None:
    """Only the first 1000 expansions were checked, so a pipe: as the 1001st name passed; all
    are checked now, the whole config's together bounded (a brace bomb is refused, not
    expanded), each refusal naming the file and the key."""
    sentinel = tmp_path / "SENTINEL"
    dataset = {
        "_target_": "engine.data.datasets.tar_shards.TarShardDataset",
        "train_shards": [pattern.replace("SENTINEL", str(sentinel))],
        "val_shards": "val.tar",
        "manifest": None,
    }
    file = _hostile(checkpoint, tmp_path, dataset=dataset)
    message = rf"^{file}: its saved config sets dataset\.train_shards\[0\]=.*{says}"
    with pytest.raises(CheckpointError, match=message):
        _evaluate(reference_cfg, monkeypatch, file)
    assert not sentinel.exists()


def test_a_checkpoint_cannot_lift_the_pixel_limit(
    checkpoint, reference_cfg, tmp_path, monkeypatch, caplog
) -> None:
    """A saved dataset.decode.max_image_pixels=null lifted the limit in eval and predict: the limit is
    this run's (its config's value, here 100 pixels; the command line's when it sets one)."""
    saved = checkpoint["config"]["dataset"]
    dataset = {**saved, "decode": {**saved["decode"], "max_image_pixels": None}}
    file = _hostile(checkpoint, tmp_path, dataset=dataset)
    args = ("mode=eval", f"eval.checkpoint={file}")
    monkeypatch.setattr("engine.inference.session.task_overrides", lambda: list(args))
    cfg = reference_cfg("out", *args, "dataset.decode.max_image_pixels=100")
    with pytest.raises(SampleError, match=r"dataset\.decode\.max_image_pixels"):
        evaluate_checkpoint(cfg)
    noted = [r.getMessage() for r in caplog.records if "max_image_pixels" in r.getMessage()]
    assert len(noted) == 1 and str(file) in noted[0] and "=None" in noted[0], noted
    lifted = _evaluate(reference_cfg, monkeypatch, file, "dataset.decode.max_image_pixels=null")
    assert "val/acc" in lifted


def test_a_checkpoint_cannot_lift_the_scan_limit(reference_cfg, caplog) -> None:
    """A saved dataset.decode.max_jpeg_scans=null (or a larger limit) is not taken either: the limit
    is this run's (its config's 100, or the command line's)."""
    saved = OmegaConf.to_container(reference_cfg("run"), resolve=True)
    saved["dataset"]["decode"]["max_jpeg_scans"] = None  # type: ignore[index]
    saved["data"] = {"classes": ["a", "b"]}  # type: ignore[index]
    cfg = reference_cfg("run", "mode=eval")
    merged = run_config(cfg, saved, ["mode=eval"], "hostile.pt")  # type: ignore[arg-type]
    assert merged.dataset.decode.max_jpeg_scans == 100
    noted = [r.getMessage() for r in caplog.records if "max_jpeg_scans" in r.getMessage()]
    assert len(noted) == 1 and "hostile.pt" in noted[0] and "=None" in noted[0], noted
    given = ["mode=eval", "dataset.decode.max_jpeg_scans=500"]
    merged = run_config(reference_cfg("run", *given), saved, given)  # type: ignore[arg-type]
    assert merged.dataset.decode.max_jpeg_scans == 500


@pytest.mark.parametrize(
    ("entry", "section", "value", "key"),
    [
        ("load_model", "model", {"width": 10**6}, r"model\.width=1000000\b"),
        ("load_model", "model", {"width": 10**9}, r"model\.width=1000000000\b"),
        ("eval", "model", {"width": 10**9}, r"model\.width=1000000000\b"),
        ("load_model", "transforms", {"size": [10**6, 10**6]}, r"transforms\.val\[0\]\.size"),
        ("eval", "transforms", {"size": [10**6, 10**6]}, r"transforms\.val\[0\]\.size"),
    ],
)
def test_a_huge_saved_model_or_resize_is_one_line_naming_the_file_and_key(
    checkpoint, reference_cfg, tmp_path, monkeypatch, entry, section, value, key
) -> None:
    """A model (or resize) far past what the weights hold died in a raw allocator error (or
    asked the allocator for terabytes): refused before it allocates, naming file and key."""
    saved = checkpoint["config"][section]
    if section == "model":
        node = {**saved, **value}
    else:
        node = {**saved, "val": [{**saved["val"][0], **value}]}
    file = _hostile(checkpoint, tmp_path, **{section: node})
    pixels = torch.randint(0, 256, (3, 60, 70), dtype=torch.uint8)
    with pytest.raises(CheckpointError, match=rf"^{file}: .*{key}"):
        if entry == "eval":
            _evaluate(reference_cfg, monkeypatch, file)
        else:
            _load(file).preprocess(pixels)


def test_a_checkpoint_never_reaches_the_network(
    checkpoint, reference_cfg, tmp_path, monkeypatch, offline, caplog
) -> None:
    """torchvision `weights=` in a saved model node downloaded them (to be replaced by the
    checkpoint's own weights), a saved dataset.download=true fetched the data, a saved URL was
    read: the first two are built offline with a one-line note, a URL is refused; each is the
    user's to set on the command line. (The reference project allows no torchvision.models:
    load_model is given its targets and that one, as a project listing it has.)"""
    torch.manual_seed(0)
    net = torchvision.models.squeezenet1_1(num_classes=1000)
    config = {
        **checkpoint["config"],
        "model": {"_target_": "torchvision.models.squeezenet1_1", "weights": "IMAGENET1K_V1"},
        "data": {**checkpoint["config"]["data"], "classes": [f"c{i}" for i in range(1000)]},
    }
    save_checkpoint(
        tmp_path / "weights.pt", {**checkpoint, "model": net.state_dict(), "config": config}
    )
    with caplog.at_level(logging.INFO, logger="engine.inference"):  # a note, no warning
        allowed = [*shipped_entries(REFERENCE / "conf" / "config.yaml"), "torchvision.models"]
        model = _load(tmp_path / "weights.pt", allowed_targets=allowed)
    assert torch.equal(model.classifier[1].weight, net.classifier[1].weight)
    assert not offline
    noted = [r.getMessage() for r in caplog.records if "model.weights" in r.getMessage()]
    assert len(noted) == 1 and "IMAGENET1K_V1" in noted[0], noted

    mnist = {
        "_target_": "engine.data.datasets.builtin.TorchvisionBuiltin",
        "name": "mnist",
        "root": str(tmp_path / "mnist"),
        "download": True,
    }
    file = _hostile(checkpoint, tmp_path, dataset=mnist)
    with pytest.raises(InstantiationException, match=r"no usable mnist files.*download=true"):
        _evaluate(reference_cfg, monkeypatch, file)
    assert not offline
    assert any("dataset.download" in r.getMessage() for r in caplog.records)

    parquet = {
        "_target_": "engine.data.datasets.parquet.ParquetDataset",
        "root": "hf://datasets/someone/something",
    }
    file = _hostile(checkpoint, tmp_path, dataset=parquet)
    message = rf"^{file}: its saved config sets dataset\.root='hf://.*reaches the network"
    with pytest.raises(CheckpointError, match=message):
        _evaluate(reference_cfg, monkeypatch, file)
    assert not offline


@pytest.mark.parametrize("entry", ["eval", "load_model"])
@pytest.mark.parametrize(
    ("field", "says"),
    [
        ("nan_weights", r"its weight head\.weight holds NaN .*: use an earlier checkpoint"),
        ("huge_step", r"its step is 1180591620717411303424, not an int >= 0.*; use a checkpoint"),
        ("huge_epoch", r"its epoch is 1180591620717411303424, not an int >= 1.*; use a checkpoint"),
    ],
)
def test_nan_weights_or_a_huge_step_are_refused_naming_file_and_field(
    checkpoint, reference_cfg, tmp_path, monkeypatch, entry, field, says
) -> None:
    """NaN weights gave NaN scores for every input; a step past int64 failed inside
    TensorBoard (the same checks refuse them to trainer.resume: engine/tests/test_checkpoints)."""
    state = dict(checkpoint)
    if field == "nan_weights":
        state["model"] = {**checkpoint["model"]}
        state["model"]["head.weight"] = torch.full_like(state["model"]["head.weight"], torch.nan)
    else:
        state[field.removeprefix("huge_")] = 2**70
    save_checkpoint(tmp_path / "hostile.pt", state)
    file = tmp_path / "hostile.pt"
    with pytest.raises(CheckpointError, match=rf"^{file}: {says}"):
        if entry == "eval":
            _evaluate(reference_cfg, monkeypatch, file)
        else:
            _load(file)


def test_a_16_mixed_checkpoint_is_evaluated_at_32_on_a_cpu_and_says_so(
    checkpoint, reference_cfg, tmp_path, monkeypatch, caplog
) -> None:
    """fp16 is emulated on a CPU (about 50x slower): a checkpoint trained at 16-mixed on a GPU
    is evaluated at 32 there, in its log line and in the eval run's config_resolved.yaml;
    the command line's trainer.precision=16-mixed is refused as a training's is."""
    trainer = {**checkpoint["config"]["trainer"], "precision": "16-mixed", "device": "auto"}
    file = _hostile(checkpoint, tmp_path, trainer=trainer)
    with caplog.at_level(logging.INFO):
        assert "val/acc" in _evaluate(reference_cfg, monkeypatch, file)
    assert (
        f"{file}: its trainer.precision=16-mixed is emulated on the CPU: run at 32" in caplog.text
    )
    resolved = OmegaConf.load(tmp_path / "out" / "config_resolved.yaml")
    assert resolved.trainer.precision == "32"
    with pytest.raises(ValueError, match=r"^trainer.precision=16-mixed on the CPU"):
        _evaluate(reference_cfg, monkeypatch, file, "trainer.precision=16-mixed")
