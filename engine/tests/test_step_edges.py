"""The fine-tuning keys of the trainer and the optimizer groups, end to end on the reference
project: trainer.ema (evaluated, picked, saved, resumed exactly), trainer.freeze_epochs (the head
alone, resumed exactly), trainer.clip_grad_norm, batch_transforms (soft targets), the parameter
groups (no decay on norms and biases, layer-wise learning rates)."""

from __future__ import annotations

import logging
import signal
from pathlib import Path

import pytest
import torch
from omegaconf import OmegaConf
from torch import nn

from engine.config.validate import validate_config
from engine.runs.checkpoint_files import load_checkpoint
from engine.training.batch_mix import MixUpCutMix, hard_labels
from engine.training.batches import DeviceBatch
from engine.training.ema import WeightsEma
from engine.training.freezing import Freezer
from engine.training.param_groups import param_groups
from engine_dev.cli import run_script
from reference.loop import train
from reference.step import EmaStep
from tests.conftest import REFERENCE, TRAIN, reference_args

EMA = ("trainer.ema.decay=0.5", "trainer.checkpoint.monitor=val/ema_loss")


def _last(cfg) -> dict:
    return load_checkpoint(Path(cfg.paths.output_dir) / "checkpoints" / "last.pt")


def _stop_after(monkeypatch: pytest.MonkeyPatch, step: int) -> None:
    original = EmaStep.optimizer_step

    def stepping(self: EmaStep) -> None:
        original(self)
        if self.steps == step:
            signal.raise_signal(signal.SIGTERM)

    monkeypatch.setattr(EmaStep, "optimizer_step", stepping)


def test_the_ema_is_evaluated_picks_best_pt_and_holds_its_weights(reference_cfg) -> None:
    cfg = reference_cfg("ema", *EMA)
    validate_config(cfg)
    metrics = train(cfg)
    assert {"val/ema_loss", "val/loss"} <= metrics.keys()
    history = (Path(cfg.paths.output_dir) / "history.csv").read_text().splitlines()
    assert "val/ema_loss" in history[0] and "val/ema_samples_per_s" not in history[0]
    best = load_checkpoint(Path(cfg.paths.output_dir) / "checkpoints" / "best.pt")
    ema = best["ema"]
    assert ema["updates"] == best["step"]  # one update per optimizer step
    assert ema["weights"].keys() == best["model"].keys()
    assert not all(torch.equal(ema["weights"][k], best["model"][k]) for k in ema["weights"])


def test_the_monitor_may_name_the_ema_only_where_there_is_one(reference_cfg) -> None:
    with pytest.raises(Exception, match=r"trainer.checkpoint.monitor='val/ema_loss' is not a per"):
        validate_config(reference_cfg("plain", "trainer.checkpoint.monitor=val/ema_loss"))


def test_a_stopped_run_resumes_to_the_uninterrupted_ema_and_frozen_head(
    reference_cfg, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Stopped mid-epoch 1 (inside the frozen epochs): the resumed run ends with the same
    weights, EMA and momenta as the one never stopped."""
    knobs = (*EMA, "trainer.freeze_epochs=1", "trainer.clip_grad_norm=0.5")
    whole = reference_cfg("whole", *knobs)
    train(whole)
    _stop_after(monkeypatch, 2)
    with pytest.raises(SystemExit):
        train(reference_cfg("first", *knobs))
    monkeypatch.undo()
    resumed = reference_cfg("second", *knobs, "trainer.resume=auto")
    train(resumed)
    a, b = _last(whole), _last(resumed)
    for key in ("model",):
        assert all(torch.equal(a[key][k], b[key][k]) for k in a[key])
    assert all(torch.equal(a["ema"]["weights"][k], b["ema"]["weights"][k]) for k in a["model"])
    assert a["ema"]["updates"] == b["ema"]["updates"] == a["step"]


def test_frozen_epochs_train_the_head_alone(reference_cfg) -> None:
    start = reference_cfg("start", "trainer.max_epochs=1", "trainer.freeze_epochs=1")
    base = reference_cfg("base", "trainer.max_epochs=1", "trainer.freeze_epochs=0")
    train(start)
    train(base)
    frozen, free = _last(start)["model"], _last(base)["model"]
    init = _initial_weights(reference_cfg)
    assert torch.equal(frozen["features.0.weight"], init["features.0.weight"])  # untouched
    assert not torch.equal(frozen["head.weight"], init["head.weight"])
    assert not torch.equal(free["features.0.weight"], init["features.0.weight"])


def _initial_weights(reference_cfg) -> dict[str, torch.Tensor]:
    """The reference model as the seeded run builds it, before any step."""
    from engine.training.assemble import assemble

    return {k: v.clone() for k, v in assemble(reference_cfg("init")).model.state_dict().items()}


def test_frozen_batchnorm_keeps_its_statistics_unless_asked() -> None:
    model = nn.Sequential(nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4), nn.Flatten(), nn.LazyLinear(5))
    model(torch.randn(2, 3, 8, 8))
    for keep, mode in ((True, False), (False, True)):
        model.train()
        Freezer(model, 5, 1, keep).apply(1)
        assert model[1].training is mode and model[3].training
        assert not model[0].weight.requires_grad and model[3].weight.requires_grad
    model.train()
    Freezer(model, 5, 1, True).apply(2)
    assert model[1].training and model[0].weight.requires_grad


def test_the_ema_warms_up_and_averages_buffers() -> None:
    model = nn.Sequential(nn.Linear(2, 2), nn.BatchNorm1d(2))
    ema = WeightsEma(model, decay=0.99)
    with torch.no_grad():
        model[0].weight.fill_(1.0)
        model[1].running_mean.fill_(1.0)
    ema.update(model)  # the first update copies
    with torch.no_grad():
        model[0].weight.fill_(2.0)
        model[1].running_mean.fill_(2.0)
    ema.update(model)  # n=1: decay min(0.99, 2/11)
    expected = 1.0 + (1 - 2 / 11)
    assert ema.model[0].weight.flatten().tolist() == pytest.approx([expected] * 4)
    assert ema.model[1].running_mean.tolist() == pytest.approx([expected] * 2)
    state = ema.state_dict()
    again = WeightsEma(model, decay=0.99)
    again.load_state_dict(state)
    assert int(again.averaged.n_averaged) == 2 == state["updates"]


def test_mixed_batches_have_soft_targets_and_count_their_argmax() -> None:
    torch.manual_seed(0)
    mix = MixUpCutMix(num_classes=4, prob=1.0)
    batch = DeviceBatch(torch.randn(8, 3, 16, 16), torch.tensor([0, 1, 2, 3] * 2), ())
    mixed = mix(batch, epoch=1)
    assert mixed.labels.shape == (8, 4)
    assert torch.allclose(mixed.labels.sum(1), torch.ones(8))
    loss = nn.functional.cross_entropy(torch.randn(8, 4), mixed.labels)
    assert torch.isfinite(loss)
    assert torch.equal(hard_labels(mixed.labels, False), mixed.labels.argmax(1))
    assert mix(batch, epoch=1).labels.shape == (8, 4)
    off = MixUpCutMix(num_classes=4, off_epoch=2)(batch, epoch=2)
    assert off is batch  # from off_epoch on: the class indices as they are
    with pytest.raises(
        ValueError, match=r"mixup_alpha=0, cutmix_alpha=0: each must be >= 0 and one > 0"
    ):
        MixUpCutMix(num_classes=4, mixup_alpha=0, cutmix_alpha=0)


def test_a_run_with_mixup_trains_on_soft_targets(reference_cfg, caplog) -> None:
    cfg = reference_cfg("mix", "trainer.max_epochs=1")
    OmegaConf.set_struct(cfg, False)
    cfg.batch_transforms = {"_target_": "engine.training.batch_mix.MixUpCutMix", "_partial_": True}
    metrics = train(cfg)
    assert torch.isfinite(torch.tensor(metrics["train/loss"]))


def test_norms_and_biases_take_no_decay_and_layers_scale_their_rate() -> None:
    from engine.models.builders import timm_model

    model = timm_model("resnet10t", 3, (3, 32, 32))
    groups = param_groups(model, lr=0.1, weight_decay=0.05)
    decay = {g["weight_decay"]: {id(p) for p in g["params"]} for g in groups}
    assert id(model.fc.bias) in decay[0.0] and id(model.bn1.weight) in decay[0.0]
    assert id(model.fc.weight) in decay[0.05] and id(model.conv1[0].weight) in decay[0.05]
    assert sum(len(g["params"]) for g in groups) == len(list(model.parameters()))
    layered = param_groups(model, lr=0.1, weight_decay=0.05, layer_decay=0.5)
    rate = {id(p): g["lr"] for g in layered for p in g["params"]}
    assert rate[id(model.fc.weight)] == pytest.approx(0.1)
    assert rate[id(model.conv1[0].weight)] < rate[id(model.layer4[0].conv1.weight)] < 0.1
    assert len({id(p) for g in layered for p in g["params"]}) == len(list(model.parameters()))
    with pytest.raises(ValueError, match=r"optimizer.layer_decay=0.5 .* Sequential does not name"):
        param_groups(nn.Sequential(nn.Linear(2, 2)), lr=0.1, layer_decay=0.5)


def test_bad_fine_tuning_keys_are_one_line_each(reference_cfg) -> None:
    for override, said in (
        ("trainer.compile=fast", "trainer.compile='fast': expected null (off) or one of"),
        ("trainer.ema.decay=1.5", "trainer.ema.decay=1.5: expected"),
        ("trainer.clip_grad_norm=0", "trainer.clip_grad_norm=0: expected"),
        ("trainer.freeze_epochs=-1", "trainer.freeze_epochs=-1: expected"),
        ("+optimizer.layer_decay=2", "optimizer.layer_decay=2: expected"),
    ):
        with pytest.raises(Exception) as refused:
            validate_config(reference_cfg("bad", override))
        assert said in str(refused.value), (override, str(refused.value))


def test_an_ema_resumed_from_a_checkpoint_without_one_starts_there(reference_cfg, caplog) -> None:
    first = reference_cfg("plain", "trainer.max_epochs=1")
    train(first)
    with caplog.at_level(logging.WARNING, logger="engine"):
        train(
            reference_cfg(
                "ema", *EMA, "trainer.max_epochs=2", f"trainer.resume={first.paths.output_dir}"
            )
        )
    assert any("holds no EMA of the weights" in m for m in caplog.messages)


@pytest.mark.parametrize("scaled", [False, True])
def test_clipping_bounds_each_step_on_the_unscaled_gradients(scaled: bool) -> None:
    """SGD at lr 1 without momentum moves the weights by exactly the clipped gradient: its norm
    is the limit, also under loss scaling (GradScaler unscales before the hook sees them)."""
    from engine.training.clipping import clip_before_each_step

    model = nn.Linear(8, 4)
    optimizer = torch.optim.SGD(model.parameters(), lr=1.0)
    clip_before_each_step(optimizer, 1e-3)
    before = torch.cat([p.detach().flatten().clone() for p in model.parameters()])
    loss = model(torch.full((16, 8), 100.0)).square().mean()
    if scaled:
        scaler = torch.amp.GradScaler("cpu", init_scale=2.0**12)
        scaler.scale(loss).backward()
        scaler.step(optimizer)
    else:
        loss.backward()
        optimizer.step()
    after = torch.cat([p.detach().flatten() for p in model.parameters()])
    assert float((after - before).norm()) == pytest.approx(1e-3, rel=1e-4)


@pytest.mark.slow  # inductor compiles for ~30 s on 2 cores
def test_a_compiled_run_saves_plain_keys_and_logs_its_compile_apart(reference_cfg, caplog) -> None:
    """trainer.compile: compiled in place before any wrapper, so the checkpoint's keys are the
    model's own; the EMA is an uncompiled copy; the compile's seconds are one line of their own."""
    from engine.inference.model import load_model

    knobs = ("trainer.compile=default", "trainer.max_epochs=2", "trainer.freeze_epochs=1")
    cfg = reference_cfg("compiled", *knobs, *EMA)
    with caplog.at_level(logging.INFO, logger="engine"):
        train(cfg)
    # once on the first batch, and again where the backbone unfreezes (other weights train)
    lines = [m for m in caplog.messages if m.startswith("torch.compile (trainer.compile=default)")]
    assert len(lines) == 2
    assert (
        "not counted in pipeline/step_ms, train/samples_per_s or train/data_wait_frac" in lines[0]
    )
    best = Path(cfg.paths.output_dir) / "checkpoints" / "best.pt"
    state = load_checkpoint(best)
    assert not any("_orig_mod" in k for k in (*state["model"], *state["ema"]["weights"]))
    model = load_model(best, project_root=REFERENCE)
    assert getattr(model, "_compiled_call_impl", None) is None  # never compiled for inference


def test_a_step_lacking_what_the_engine_calls_is_named_when_the_training_starts(
    reference_cfg, monkeypatch
) -> None:
    """The engine calls optimizer_step() itself for an epoch's last, partial accumulation
    group: a step without it is refused at the start, naming it, not after an epoch's work."""
    import reference.loop

    class Renamed:
        def __init__(self, *args, **kwargs) -> None:
            self.inner = EmaStep(*args, **kwargs)
            self.optimizer, self.scheduler = self.inner.optimizer, self.inner.scheduler
            self.precision, self.steps = self.inner.precision, 0

        def forward(self, batch):
            return self.inner.forward(batch)

    monkeypatch.setattr(reference.loop, "EmaStep", Renamed)
    with pytest.raises(TypeError, match=r"train step .*Renamed lacks optimizer_step: the engine"):
        train(reference_cfg("renamed"))


class NoCall:
    """A step class without __call__ (the template's loop never calls step(batch))."""

    def optimizer_step(self) -> None: ...


class NoOptimizerStep:
    def __call__(self, batch) -> None: ...


@pytest.mark.parametrize(
    ("cls", "args", "lacks", "where"),
    [
        (NoOptimizerStep, ["mode=train"], "optimizer_step", "mode=train"),
        (
            NoCall,
            ["mode=benchmark", "benchmark.compute=model"],
            "__call__",
            "mode=benchmark with benchmark.compute=model",
        ),
    ],
)
def test_a_step_class_lacking_what_the_run_calls_is_refused_before_any_work(
    demo_dir, tmp_path, monkeypatch, cls: type, args: list[str], lacks: str, where: str
) -> None:
    """engine.app.run checks the step class train.py hands it for the method of engine.api.Step
    this run calls, before any work: one line naming the class, the method and the fix."""
    import reference.step

    monkeypatch.setattr(reference.step, "EmaStep", cls)
    said = run_script(TRAIN, *reference_args(demo_dir, tmp_path, *args), cwd=tmp_path)
    assert said.returncode != 0
    assert (
        f"{where}: the step class {cls.__module__}.{cls.__qualname__} given to "
        f"engine.app.run(step=...) in train.py lacks {lacks}(), which the engine calls"
    ) in said.stderr, said.stderr[-2000:]
    assert f"define {lacks}() as src/step.py's TrainStep does." in said.stderr
    assert not list(tmp_path.glob("runs/*/*/checkpoints"))  # refused before any work


def test_a_step_class_lacking_only_what_the_run_never_calls_runs(
    demo_dir, tmp_path, monkeypatch
) -> None:
    """mode=benchmark without the model (benchmark.compute=none) never calls the step."""
    import reference.step

    monkeypatch.setattr(reference.step, "EmaStep", NoCall)
    args = ["mode=benchmark", "benchmark.compute=none", "benchmark.batches=2"]
    said = run_script(TRAIN, *reference_args(demo_dir, tmp_path, *args), cwd=tmp_path)
    assert said.returncode == 0, said.stderr[-2000:]


def test_mode_benchmark_names_a_step_it_cannot_build_by_position() -> None:
    from types import SimpleNamespace

    from engine.modes.benchmark import train_step

    class Keyworded:
        def __init__(self, *, model, criterion) -> None:
            pass

    model = nn.Linear(2, 2)
    parts = SimpleNamespace(model=model, criterion=nn.CrossEntropyLoss(), precision=None)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    with pytest.raises(TypeError, match=r"as TrainStep\(model, criterion, optimizer, scheduler, "
                       r"precision\).*Keyworded\(\*, model, criterion\) does not take that"):  # fmt: skip
        train_step(parts, optimizer, Keyworded)
    assert callable(train_step(parts, optimizer, EmaStep))
