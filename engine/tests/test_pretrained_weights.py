"""Pretrained weights by config (engine/models): a file from elsewhere is hostile input, a head
of another class count is initialised afresh, every other misfit is named key by key in one
line, hub weights never wait on a network that is not there, and transforms=model reads the
model's data config without a download."""

from __future__ import annotations

import logging
import pickle
import time
from collections import OrderedDict
from pathlib import Path

import pytest
import torch
import torchvision
from safetensors.torch import save_file
from torchvision.transforms import InterpolationMode, v2

from engine.data.transforms import Normalizer
from engine.models import hub
from engine.models.builders import timm_model, torchvision_model
from engine.models.data_config import model_pipelines
from engine.models.weights import WeightsError, load_matching, read_weights
from engine.runs.checkpoint_files import save_checkpoint
from engine.training.models import warn_if_normalised_otherwise

KEY = "model.pretrained_file"
SHAPE = (3, 32, 32)


def _resnet(num_classes: int, channels: int = 3) -> torch.nn.Module:
    return timm_model("resnet10t", num_classes, (channels, 32, 32))


@pytest.fixture
def saved(tmp_path: Path) -> tuple[torch.nn.Module, Path]:
    """A 7-class resnet10t and its state dict saved as a .pth."""
    model = _resnet(7)
    path = tmp_path / "weights.pth"
    torch.save(model.state_dict(), path)
    return model, path


def test_a_file_of_another_class_count_loads_all_but_a_fresh_head(saved, caplog) -> None:
    source, path = saved
    with caplog.at_level(logging.INFO, logger="engine.models"):
        model = timm_model("resnet10t", 3, SHAPE, pretrained_file=str(path))
    ours, theirs = model.state_dict(), source.state_dict()
    assert all(torch.equal(ours[k], theirs[k]) for k in ours if not k.startswith("fc."))
    assert ours["fc.weight"].shape == (3, 512)  # the new head, for the data's 3 classes
    (line,) = [m for m in caplog.messages if "pretrained weights from" in m]
    assert f"pretrained weights from {path}: {len(ours) - 2} of {len(ours)} loaded" in line
    assert line.endswith("new: fc.weight, fc.bias")


def test_safetensors_and_wrapped_or_prefixed_state_dicts_read_alike(saved, tmp_path) -> None:
    source, _ = saved
    weights = source.state_dict()
    save_file({k: v.contiguous() for k, v in weights.items()}, tmp_path / "w.safetensors")
    torch.save(
        {"state_dict": {f"module._orig_mod.{k}": v for k, v in weights.items()}, "epoch": 3},
        tmp_path / "lightning.ckpt",
    )
    for name in ("w.safetensors", "lightning.ckpt"):
        read = read_weights(tmp_path / name, KEY).tensors
        assert read.keys() == weights.keys() and all(torch.equal(read[k], weights[k]) for k in read)


def test_a_template_checkpoint_gives_the_weights_its_monitor_picked(saved, tmp_path) -> None:
    source, _ = saved
    trained = source.state_dict()
    averaged = {k: v + 1 if v.is_floating_point() else v for k, v in trained.items()}
    for monitor, expected in (("val/ema_loss", averaged), ("val/loss", trained)):
        state = {
            "model": trained,
            "ema": {"weights": averaged, "updates": 5},
            "config": {"trainer": {"checkpoint": {"monitor": monitor}}},
        }
        save_checkpoint(tmp_path / "best.pt", state)
        file = read_weights(tmp_path / "best.pt", KEY)
        read, said = file.tensors, file.source
        assert said.endswith(f"its {'EMA' if monitor == 'val/ema_loss' else 'trained'} weights)")
        assert all(torch.equal(read[k], expected[k]) for k in expected), monitor


def test_weights_of_another_shape_are_named_key_by_key_in_one_line(saved) -> None:
    _, path = saved
    with pytest.raises(WeightsError) as refused:
        timm_model("resnet10t", 7, (1, 32, 32), pretrained_file=str(path))
    message = str(refused.value)
    assert "\n" not in message
    assert message.startswith(f"{KEY}: 1 weight(s) of {path} do not fit this model:")
    assert "conv1.0.weight: 24x3x3x3 floating there, 24x1x3x3 floating here" in message


def test_a_file_of_which_nothing_fits_is_refused(tmp_path) -> None:
    torch.save({"encoder.layer.0.weight": torch.ones(4, 4)}, tmp_path / "other.pt")
    with pytest.raises(WeightsError, match=r"no weight of .*other\.pt outside the head fits"):
        timm_model("resnet10t", 3, SHAPE, pretrained_file=str(tmp_path / "other.pt"))


class _Runs:
    """Pickled, it would run code on load (os.system): weights_only refuses it."""

    def __reduce__(self) -> tuple:
        return (Path.touch, (Path("/tmp/pretrained-file-ran-code"),))


def test_hostile_files_are_refused_and_run_nothing(tmp_path) -> None:
    ran = Path("/tmp/pretrained-file-ran-code")
    ran.unlink(missing_ok=True)
    cases = {
        "code.pt": lambda p: p.write_bytes(pickle.dumps({"w": _Runs()}, protocol=2)),
        "mixed.pt": lambda p: torch.save({"w": torch.ones(2), "note": "text"}, p),
        "nan.pt": lambda p: torch.save({"w": torch.tensor([float("nan")])}, p),
        "cut.safetensors": lambda p: p.write_bytes(b'\x10\x00\x00\x00\x00\x00\x00\x00{"a'),
        "empty.pt": lambda p: p.write_bytes(b""),
    }
    reasons = {
        "code.pt": "holds objects other than tensors",
        "mixed.pt": "mixes other values with its weights (note)",
        "nan.pt": "its weight w holds NaN or infinite values",
        "cut.safetensors": "is no readable safetensors file",
        "empty.pt": "is empty (0 bytes)",
    }
    for name, write in cases.items():
        write(tmp_path / name)
        with pytest.raises(WeightsError) as refused:
            read_weights(tmp_path / name, KEY)
        assert str(refused.value).startswith(f"{KEY}") and reasons[name] in str(refused.value)
        assert "\n" not in str(refused.value), name
    assert not ran.exists()
    with pytest.raises(WeightsError, match=r"no such file; give a state dict"):
        read_weights(tmp_path / "missing.pt", KEY)


def test_a_head_is_fresh_only_where_the_class_count_differs(saved) -> None:
    source, _ = saved
    model = _resnet(7)
    loaded = load_matching(model, source.state_dict(), "src", KEY, 7)
    assert loaded.new == [] and torch.equal(model.fc.weight, source.fc.weight)


def test_hub_weights_not_cached_and_not_reachable_stop_in_seconds(tmp_path, monkeypatch) -> None:
    """No network here is simulated by a closed local port: the hub answers nothing."""
    monkeypatch.setattr(hub.hf, "HF_HUB_CACHE", str(tmp_path / "hf"))
    monkeypatch.setattr(hub.hf, "ENDPOINT", "http://127.0.0.1:9")
    monkeypatch.setenv("TORCH_HOME", str(tmp_path / "torch"))
    monkeypatch.setenv("https_proxy", "http://127.0.0.1:9")  # urllib's probe goes through it
    start = time.perf_counter()
    with pytest.raises(WeightsError) as timm_refused:
        timm_model("resnet10t", 3, SHAPE, pretrained=True)
    with pytest.raises(WeightsError) as tv_refused:
        torchvision_model("resnet18", 3, SHAPE, weights="IMAGENET1K_V1")
    assert time.perf_counter() - start < 15
    timm_line, tv_line = str(timm_refused.value), str(tv_refused.value)
    assert timm_line.startswith("model.pretrained=true: timm's weights for resnet10t (hf-hub:")
    assert f"not in the cache ({tmp_path / 'hf'}/models--timm--resnet10t" in timm_line
    assert tv_line.startswith("model.weights=IMAGENET1K_V1: torchvision's resnet18 weights")
    assert f"not in the cache ({tmp_path / 'torch' / 'hub' / 'checkpoints'}/resnet18-" in tv_line
    for line in (timm_line, tv_line):
        assert "model.pretrained_file=PATH" in line and "\n" not in line


def test_cached_hub_weights_load_without_a_network(tmp_path, monkeypatch) -> None:
    """A cache copied from a machine with a network: loaded from it, nothing asked of the hub."""
    monkeypatch.setenv("TORCH_HOME", str(tmp_path / "torch"))
    monkeypatch.setenv("https_proxy", "http://127.0.0.1:9")
    member = torchvision_model.__globals__["weights_member"]("resnet18", "IMAGENET1K_V1")
    source = torchvision_model("resnet18", 1000, SHAPE)
    cached = hub.url_file(member.url)
    cached.parent.mkdir(parents=True)
    torch.save(source.state_dict(), cached)
    model = torchvision_model("resnet18", 4, SHAPE, weights="IMAGENET1K_V1")
    assert torch.equal(model.conv1.weight, source.conv1.weight) and model.fc.out_features == 4
    assert model.pretrained_stats[:2] == ([0.485, 0.456, 0.406], [0.229, 0.224, 0.225])


def test_names_and_channels_are_refused_with_the_fix() -> None:
    with pytest.raises(ValueError, match=r"model.name='resnet10x': no timm model .*did you mean"):
        timm_model("resnet10x", 3, SHAPE)
    with pytest.raises(ValueError, match=r"takes 3-channel images, the data gives 1"):
        torchvision_model("resnet18", 3, (1, 32, 32))
    with pytest.raises(WeightsError, match=r"model.weights='IMAGENET1K_V9': ResNet18_Weights has"):
        torchvision_model("resnet18", 3, SHAPE, weights="IMAGENET1K_V9")
    with pytest.raises(
        WeightsError, match=r"model=timm: model.pretrained and model.pretrained_file both give"
    ):
        timm_model("resnet10t", 3, SHAPE, pretrained=True, pretrained_file="x.pt")


def test_model_kwargs_reach_the_builder_and_may_not_set_what_the_data_sets(tmp_path) -> None:
    model = timm_model("resnet10t", 3, SHAPE, kwargs={"global_pool": "max"})
    assert model.global_pool.pool_type == "max"
    efficientnet = torchvision_model("efficientnet_b0", 3, SHAPE, kwargs={"dropout": 0.3})
    assert efficientnet.classifier[0].p == 0.3
    with pytest.raises(
        ValueError, match=r"^model.kwargs sets num_classes, in_chans, which model=timm does not"
    ):
        timm_model("resnet10t", 3, SHAPE, kwargs={"num_classes": 5, "in_chans": 1})
    with pytest.raises(ValueError, match=r"^model.kwargs sets weights, .*use model.weights\)"):
        torchvision_model("resnet18", 3, SHAPE, kwargs={"weights": "DEFAULT"})
    # weights past the engine's reader, a second source beside model.pretrained_file
    with pytest.raises(ValueError, match=r"checkpoint_path: use model.pretrained_file"):
        timm_model("resnet10t", 3, SHAPE, kwargs={"checkpoint_path": str(tmp_path / "w.pth")})
    with pytest.raises(ValueError, match=r"sets aux_logits, .*auxiliary heads are off"):
        torchvision_model("googlenet", 3, SHAPE, kwargs={"aux_logits": True})
    with pytest.raises(ValueError, match=r"^model.kwargs.bogus: model=timm's builder does not"):
        timm_model("resnet10t", 3, SHAPE, kwargs={"bogus": 1})
    with pytest.raises(ValueError, match=r"^model.kwargs.bogus: model=torchvision's builder"):
        torchvision_model("resnet18", 3, SHAPE, kwargs={"bogus": 1})


@pytest.mark.parametrize(
    ("target", "name", "kwargs", "size", "resize"),
    [
        ("timm", "vit_tiny_patch16_224", {"img_size": 96}, 96, 106),  # crop 224 of 248 kept
        ("timm", "vit_tiny_patch16_224", {"img_size": [64, 96]}, [64, 96], [70, 106]),
        ("torchvision", "vit_b_16", {"image_size": 112}, 112, 128),  # 224 of 256
    ],
)
def test_transforms_model_crops_to_the_size_model_kwargs_sets(
    target, name, kwargs, size, resize
) -> None:
    """model.kwargs={img_size: 96} made a ViT for 96 px while transforms=model cropped 224:
    the first forward failed, naming neither key."""
    pipelines = model_pipelines(f"engine.models.builders.{target}_model", name, kwargs=kwargs)
    crop, shorter = pipelines.train.transforms[0], pipelines.val.transforms[0]
    assert list(crop.size) == ([size, size] if isinstance(size, int) else size)
    assert shorter.size == ([resize] if isinstance(resize, int) else resize)
    model = timm_model(name, 3, (3, 64, 96), kwargs=kwargs) if size == [64, 96] else None
    if model is not None:
        assert model(torch.zeros(1, 3, 64, 96)).shape == (1, 3)


@pytest.mark.parametrize(
    ("target", "name", "weights", "sizes", "interpolation", "mean"),
    [
        ("timm", "resnet18.a1_in1k", None, (224, 235), "bicubic", [0.485, 0.456, 0.406]),
        ("timm", "vit_tiny_patch16_224", None, (224, 248), "bicubic", [0.5, 0.5, 0.5]),
        ("torchvision", "resnet50", "IMAGENET1K_V2", (224, 232), "bilinear", [0.485, 0.456, 0.406]),
        ("torchvision", "resnet50", None, (224, 232), "bilinear", [0.485, 0.456, 0.406]),
        ("torchvision", "resnet50", "IMAGENET1K_V1", (224, 256), "bilinear", [0.485, 0.456, 0.406]),
    ],
)
def test_transforms_follow_the_models_pretrained_config(
    target, name, weights, sizes, interpolation, mean
) -> None:
    builder = f"engine.models.builders.{target}_model"
    pipelines = model_pipelines(builder, name, weights)
    crop, flip = pipelines.train.transforms
    resize, center = pipelines.val.transforms
    assert isinstance(crop, v2.RandomResizedCrop) and isinstance(flip, v2.RandomHorizontalFlip)
    assert (crop.size[0], resize.size[0]) == sizes and center.size[0] == sizes[0]
    assert crop.interpolation == resize.interpolation == InterpolationMode(interpolation)
    assert pipelines.normalizer.mean.tolist() == pytest.approx(mean)


def test_transforms_model_needs_a_pretrained_model_group() -> None:
    with pytest.raises(ValueError, match=r"transforms=model follows a pretrained model's data"):
        model_pipelines("src.models.small_cnn.SmallCNN", None)


def test_a_normalisation_other_than_the_pretrained_one_is_one_warning(caplog) -> None:
    model = _resnet(3)
    model.pretrained_stats = ([0.5, 0.5, 0.5], [0.5, 0.5, 0.5], "somewhere")
    with caplog.at_level(logging.WARNING, logger="engine"):
        warn_if_normalised_otherwise(model, Normalizer([0.5] * 3, [0.5] * 3))
        assert not caplog.messages
        warn_if_normalised_otherwise(
            model, Normalizer([0.485, 0.456, 0.406], [0.229, 0.224, 0.225])
        )
    (line,) = caplog.messages
    assert "(somewhere) were trained on inputs normalised with mean [0.5, 0.5, 0.5]" in line
    assert "this run normalises with mean [0.485" in line and "transforms=model" in line


def test_timm_weights_in_the_hub_cache_load_without_a_network(
    tmp_path, monkeypatch, caplog
) -> None:
    """A Hugging Face cache copied from a machine with a network: timm loads the cached file
    itself (its head replaced for the data's classes), and the hub is never asked."""
    monkeypatch.setattr(hub.hf, "HF_HUB_CACHE", str(tmp_path / "hf"))
    monkeypatch.setattr(hub.hf, "ENDPOINT", "http://127.0.0.1:9")
    source = _resnet(1000)
    repo = tmp_path / "hf" / "models--timm--resnet10t.c3_in1k"
    (repo / "refs").mkdir(parents=True)
    (repo / "refs" / "main").write_text("0" * 40)
    snapshot = repo / "snapshots" / ("0" * 40)
    snapshot.mkdir(parents=True)
    save_file(
        {k: v.contiguous() for k, v in source.state_dict().items()}, snapshot / "model.safetensors"
    )
    start = time.perf_counter()
    with caplog.at_level(logging.INFO, logger="engine.models"):
        model = timm_model("resnet10t", 3, (1, 32, 32), pretrained=True)
    assert time.perf_counter() - start < 10
    grey = source.conv1[0].weight.sum(dim=1, keepdim=True)  # timm's adaptation to one channel
    assert torch.allclose(model.conv1[0].weight, grey) and model.fc.out_features == 3
    (line,) = [m for m in caplog.messages if "pretrained weights from" in m]
    assert f"(hf-hub:timm/resnet10t.c3_in1k) ({repo}/snapshots/" in line
    assert "new: fc.weight, fc.bias" in line
    assert line.endswith("the first layer (conv1.0) adapted from 3 to 1 channels")


def test_a_planted_cache_file_runs_nothing(tmp_path, monkeypatch) -> None:
    """A cache copied from elsewhere is read as any weights file: torch.hub's own loader
    (weights_only=False) would run a pickle's code; the engine's reader refuses it."""
    ran = Path("/tmp/pretrained-file-ran-code")
    ran.unlink(missing_ok=True)
    monkeypatch.setenv("TORCH_HOME", str(tmp_path / "torch"))
    monkeypatch.setattr(hub.hf, "HF_HUB_CACHE", str(tmp_path / "hf"))
    member = torchvision_model.__globals__["weights_member"]("resnet18", "IMAGENET1K_V1")
    planted = hub.url_file(member.url)
    planted.parent.mkdir(parents=True)
    planted.write_bytes(pickle.dumps({"w": _Runs()}, protocol=2))
    snapshot = tmp_path / "hf" / "models--timm--resnet10t.c3_in1k" / "snapshots" / ("0" * 40)
    snapshot.mkdir(parents=True)
    (snapshot.parents[1] / "refs").mkdir()
    (snapshot.parents[1] / "refs" / "main").write_text("0" * 40)
    (snapshot / "pytorch_model.bin").write_bytes(pickle.dumps({"w": _Runs()}, protocol=2))
    with pytest.raises(WeightsError, match=r"^model.weights=IMAGENET1K_V1: .* holds objects other"):
        torchvision_model("resnet18", 3, SHAPE, weights="IMAGENET1K_V1")
    with pytest.raises(WeightsError, match=r"^model.pretrained=true: .* holds objects other than"):
        timm_model("resnet10t", 3, SHAPE, pretrained=True)
    assert not ran.exists()


@pytest.mark.filterwarnings(
    "ignore:Validating sparse tensor invariants"
)  # torch, on the sparse one
def test_weights_of_a_kind_no_model_holds_are_refused_in_one_line(saved, tmp_path) -> None:
    """Integer weights would be cast to floats without a word (a loss of 3456 where 1.6 was
    due); float8, sparse and meta tensors crashed the NaN check; a stride-0 view of 1 KB asked
    for terabytes."""
    source, _ = saved
    weights = source.state_dict()
    cases = {
        "int.pt": (
            {**weights, "conv1.0.weight": weights["conv1.0.weight"].to(torch.int32)},
            "conv1.0.weight: 24x3x3x3 integer there, 24x3x3x3 floating here",
        ),
        "fp8.pt": (
            {"w": torch.zeros(4).to(torch.float8_e4m3fn)},
            "its weight w is a tensor of a kind no model state holds (torch.float8_e4m3fn",
        ),
        "sparse.pt": (
            {"w": torch.eye(3).to_sparse()},
            "its weight w is a tensor of a kind no model state holds",
        ),
        "meta.pt": ({"w": torch.zeros(3, device="meta")}, "on meta"),
        "expand.pt": (
            {"w": torch.zeros(1).expand(10**6, 10**6)},
            "its weight w is a view of 1,000,000,000,000 values over a storage of 4 bytes",
        ),
    }
    for name, (state, said) in cases.items():
        torch.save(state, tmp_path / name)
        with pytest.raises(WeightsError) as refused:
            timm_model("resnet10t", 3, SHAPE, pretrained_file=str(tmp_path / name))
        assert said in str(refused.value) and "\n" not in str(refused.value), name


def test_a_lightning_modules_prefix_is_taken_off(saved, tmp_path, caplog) -> None:
    source, _ = saved
    weights = {f"model.{k}": v for k, v in source.state_dict().items()}
    torch.save({"state_dict": weights, "epoch": 3, "global_step": 9}, tmp_path / "last.ckpt")
    with caplog.at_level(logging.INFO, logger="engine.models"):
        model = timm_model("resnet10t", 3, SHAPE, pretrained_file=str(tmp_path / "last.ckpt"))
    assert torch.equal(model.conv1[0].weight, source.conv1[0].weight)
    assert any("(every key's model. taken off)" in m for m in caplog.messages)
    # the module versions torch keeps beside the keys lose the prefix too (they are read by
    # module path: BatchNorm's, MNASNet's)
    prefixed = OrderedDict((f"model.{k}", v) for k, v in source.state_dict().items())
    prefixed._metadata = {
        f"model.{k}".rstrip("."): v for k, v in source.state_dict()._metadata.items()
    }
    given = []
    model.load_state_dict = lambda state, strict: given.append(state) or ([], [])
    load_matching(model, prefixed, "last.ckpt", "model.pretrained_file", 3)
    assert given[0]._metadata["bn1"] == source.state_dict()._metadata["bn1"]
    assert "model.bn1" not in given[0]._metadata


def test_a_head_alone_or_a_buffer_is_no_pretrained_model(tmp_path) -> None:
    torch.save({"bn1.num_batches_tracked": torch.tensor(5)}, tmp_path / "buffer.pt")
    torch.save(
        {k: v for k, v in _resnet(3).state_dict().items() if k.startswith("fc.")},
        tmp_path / "head.pt",
    )
    for name in ("buffer.pt", "head.pt"):
        with pytest.raises(WeightsError, match=r"no weight of .* outside the head fits this model"):
            timm_model("resnet10t", 3, SHAPE, pretrained_file=str(tmp_path / name))


@pytest.mark.parametrize("name", ["googlenet", "mnasnet0_5"])
@pytest.mark.filterwarnings("ignore:The default weight initialization of GoogleNet")
def test_torchvision_classifiers_with_auxiliary_heads_or_versions_load_and_train(
    name, tmp_path
) -> None:
    """GoogLeNet's auxiliary heads (built without them: a training forward returns logits), and
    MNASNet's module versions (its state dict's metadata kept through the matching)."""
    full = (
        torchvision.models.get_model(name, weights=None, num_classes=1000, init_weights=True)
        if name == "googlenet"
        else torchvision.models.get_model(name, weights=None)
    )
    torch.save(full.state_dict(), tmp_path / "w.pth")
    model = torchvision_model(name, 5, (3, 64, 64), pretrained_file=str(tmp_path / "w.pth"))
    logits = model.train()(torch.randn(2, 3, 64, 64))
    assert isinstance(logits, torch.Tensor) and logits.shape == (2, 5)


def test_a_distilled_vits_two_heads_are_both_heads() -> None:
    source = timm_model("deit_tiny_distilled_patch16_224", 7, (3, 224, 224))
    model = timm_model("deit_tiny_distilled_patch16_224", 3, (3, 224, 224))
    loaded = load_matching(model, source.state_dict(), "src", KEY, 3)
    assert sorted(loaded.new) == ["head.bias", "head.weight", "head_dist.bias", "head_dist.weight"]


def test_a_weights_name_of_another_model_and_an_unknown_tag_are_refused() -> None:
    with pytest.raises(
        WeightsError,
        match=r"names ResNet50_Weights, but model.name=resnet18 takes ResNet18_Weights",
    ):
        torchvision_model("resnet18", 3, SHAPE, weights="ResNet50_Weights.IMAGENET1K_V1")
    with pytest.raises(
        ValueError, match=r"timm has no weights tagged 'a1_typo' for resnet10t; its tags: c3_in1k"
    ):
        timm_model("resnet10t.a1_typo", 3, SHAPE)
