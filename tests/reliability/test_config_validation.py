"""A bad config stops the run before any work with one short message naming the key, on every
option conf/ ships. The checker's types on their own (tensors, paths, non-finite floats in
every settings dataclass): the engine's tests/test_config_checks.py."""

from __future__ import annotations

from pathlib import Path

import pytest
from omegaconf import open_dict

from engine.config.errors import ConfigError
from engine.config.validate import validate_config
from tests.conftest import group_options

OPTIONS = group_options()
GROUPS = sorted({group for group, _ in OPTIONS})


def _refused(make_cfg, *overrides: str) -> str:
    """The ConfigError message for `overrides`, checked to be short and unchained."""
    with pytest.raises(ConfigError) as caught:
        validate_config(make_cfg(*overrides))
    assert caught.value.__cause__ is None and caught.value.__suppress_context__
    return str(caught.value)


MULTI_LABEL_OPTIONS = {("loss", "bce"), ("metrics", "multilabel")}


@pytest.mark.parametrize(("group", "option"), OPTIONS)
def test_every_shipped_option_passes(make_cfg, group: str, option: str) -> None:
    override = f"+{group}={option}" if group == "sweep" else f"{group}={option}"
    # the options for multi-hot labels pass on the multi-label preset's data
    data = ["experiment=multilabel_csv"] if (group, option) in MULTI_LABEL_OPTIONS else []
    validate_config(make_cfg(*data, override))  # experiments and debug presets included


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ("loader.batch_size=0", "loader.batch_size=0: expected int >= 1."),
        ("loader.batch_size=-4", "loader.batch_size=-4: expected int >= 1."),
        ("trainer.max_epochs=0", "trainer.max_epochs must be >= 1, got 0."),
        ("loader.batch_size=abc", "loader.batch_size='abc': expected int, got str"),
        ("trainer.max_epochs=1.5", "trainer.max_epochs=1.5: expected int, got float"),
        ("loader.shuffle=[1,2]", "loader.shuffle=[1, 2]: expected bool, got list"),
        ("loader.collate_fn=pad", "loader.collate_fn='pad': expected Callable | None, got str"),
        ("+loader.batchsize=3", "loader.batchsize: unknown key (did you mean loader.batch_size?)"),
        ("optimizer.lr=???", "optimizer.lr=??? is a required value that nothing set"),
        (
            "dataset.root=${paths.nope}",
            "dataset.root=${paths.nope}: the interpolation cannot be "
            "resolved (Interpolation key 'paths.nope' not found)",
        ),
        (
            "dataset._target_=engine.data.datasets.nope.Reader",
            "dataset._target_=engine.data.datasets."
            "nope.Reader: cannot be imported "
            "(ModuleNotFoundError",
        ),
        (
            "model._target_=src.models.small_cnn.NoNet",
            "model._target_=src.models.small_cnn.NoNet: cannot be imported",
        ),
        (
            "trainer.checkpoint.monitor=val/accuracy",
            "trainer.checkpoint.monitor='val/accuracy' is not a per-epoch value of this run (did "
            "you mean val/acc?)",
        ),
        ("trainer.checkpoint.keep_last=0", "trainer.checkpoint.keep_last=0: expected int >= 1."),
        (
            "trainer.checkpoint.mode=mx",
            "trainer.checkpoint.mode='mx': expected max or min (or null: min for a loss, max "
            "for a metric).",
        ),
        ("trainer.precision=16", "trainer.precision=16: expected one of ['32', 'bf16-mixed'"),
        ("trainer.device=gpu", "trainer.device='gpu': expected auto, cpu, cuda, cuda:N or mps."),
        # a word or a bool for a Tensor-annotated value (Adam's lr: float | Tensor)
        (
            "optimizer.lr=fast",
            "optimizer.lr='fast': expected float | torch.Tensor, got str; set a "
            "number, e.g. optimizer.lr=0.001 (torch.optim.Adam takes lr: ",
        ),
        (
            "optimizer.lr=true",
            "optimizer.lr=True: expected float | torch.Tensor, got bool; set a number",
        ),
        # inf and nan pass every type check and fail only after a step
        ("optimizer.lr=inf", "optimizer.lr=inf: expected a finite number"),
        ("optimizer.lr=nan", "optimizer.lr=nan: expected a finite number"),
        ("optimizer.lr=-inf", "optimizer.lr=-inf: expected a finite number"),
        ("+optimizer.betas=[0.9,inf]", "optimizer.betas=[0.9, inf]: expected a finite number"),
        ("model.dropout=nan", "model.dropout=nan: expected a finite number"),
        ("loader.timeout=inf", "loader.timeout=inf: expected a finite number"),
        (
            "trainer.starvation_threshold=-inf",
            "trainer.starvation_threshold=-inf: expected a finite number",
        ),
        (
            "trainer.checkpoint.every_minutes=nan",
            "trainer.checkpoint.every_minutes=nan: expected a finite number",
        ),
        (
            "trainer.checkpoint.every_n_steps=inf",
            "trainer.checkpoint.every_n_steps=inf: expected int, got float; set an int",
        ),
        ("loader.batch_size=nan", "loader.batch_size=nan: expected int, got float"),
        ("benchmark.batches=inf", "benchmark.batches=inf: expected int, got float"),
        ("cache.short_side=inf", "cache.short_side=inf: expected int | None, got float"),
        ("inspect.images=nan", "inspect.images=nan: expected int, got float"),
    ],
)
def test_bad_value_gives_one_short_message(make_cfg, override: str, message: str) -> None:
    text = _refused(make_cfg, override)
    assert text.startswith(message), text
    assert len(text.splitlines()) == 1 and "Error in call to target" not in text


def test_a_monitor_set_by_hand_is_still_checked_against_the_metrics_group(make_cfg) -> None:
    # left null it follows metrics=multilabel (val/map); set by hand it must be one of its values
    validate_config(make_cfg("experiment=multilabel_csv"))
    text = _refused(make_cfg, "experiment=multilabel_csv", "trainer.checkpoint.monitor=val/acc")
    assert text.startswith(
        "trainer.checkpoint.monitor='val/acc' is not a per-epoch value of this run (did you "
        "mean val/map?)"
    ), text
    assert len(text.splitlines()) == 1


@pytest.mark.parametrize(
    ("override", "message"),
    [
        (
            "dataset.decode.max_image_pixels=0",
            "dataset.decode.max_image_pixels=0: expected >= 1 and <= 2",
        ),
        (
            "dataset.decode.max_jpeg_scans=0",
            "dataset.decode.max_jpeg_scans=0: expected >= 1 and <= 2",
        ),
        (
            "dataset=parquet dataset.decode.max_jpeg_scans=-1",
            "dataset.decode.max_jpeg_scans=-1: expected >= 1",
        ),
        (
            "dataset.decode.max_bad_fraction=2",
            "dataset.decode.max_bad_fraction=2: expected >= 0 and <= 1",
        ),
        ("optimizer.lr=-1", "optimizer.lr=-1: expected >= 0, e.g. optimizer.lr=0.001"),
        ("optimizer.weight_decay=-1", "optimizer.weight_decay=-1: expected >= 0"),
        ("loss.label_smoothing=1", "loss.label_smoothing=1: expected >= 0 and < 1"),
        ("model.widths=[8,0]", "model.widths=[8, 0]: expected every item >= 1"),
        ("model.dropout=1.5", "model.dropout=1.5: expected >= 0 and < 1"),
        ("trainer.seed=-1", "trainer.seed=-1: expected >= 0 and <= 4,294,967,295"),
        ("trainer.starvation_threshold=2", "trainer.starvation_threshold=2: expected >= 0"),
        ("metrics.acc.k=0", "metrics.acc.k=0: expected >= 1"),
        ("scheduler.warmup_frac=-0.5", "scheduler.warmup_frac=-0.5: expected >= 0 and <= 1"),
        ("inspect.batches=0", "inspect.batches=0: expected >= 1"),
        ("sampler=weighted sampler.num_samples=0", "sampler.num_samples=0: expected >= 1"),
        ("dataset=iterable dataset.shuffle_buffer=-1", "dataset.shuffle_buffer=-1: expected >= 0"),
        ("dataset=iterable dataset.read_timeout=0", "dataset.read_timeout=0: expected > 0"),
        ("dataset=parquet dataset.read_timeout=0", "dataset.read_timeout=0: expected > 0"),
        ("dataset=tensor dataset.val_fraction=1", "dataset.val_fraction=1: expected > 0 and < 1"),
        ("summary.top=-1", "summary.top=-1: expected an int >= 1"),
        ("model.widths=[8,10000000000]", "model.widths=[8, 10000000000]: expected every item"),
        ("transforms.train.0.size=0", "transforms.train[0].size=0: expected >= 1"),
        ("loader.prefetch_factor=100000", "loader.prefetch_factor=100000: expected int from 1"),
        ("dataset=iterable dataset.read_timeout=1e30", "dataset.read_timeout=1e+30: expected"),
        ("summary.top=abc", "summary.top='abc': expected an int >= 1"),
    ],
)
def test_a_value_out_of_its_bounds_is_one_line_before_any_work(make_cfg, override, message):
    """Bounds written in the parameters' type hints (engine/src/engine/core/bounds.py), or torch's own
    for torch.optim, are checked with the config: not at the first batch, deep in torch."""
    text = _refused(make_cfg, *override.split())
    assert text.startswith(message), text
    assert len(text.splitlines()) == 1


def test_typo_in_an_experiment_yaml(make_cfg, tmp_path: Path) -> None:
    (tmp_path / "experiment").mkdir()
    (tmp_path / "experiment" / "typo.yaml").write_text(
        "# @package _global_\nmodel:\n  widht: [8, 16]  # typo of widths\n"
    )
    text = _refused(
        make_cfg, f"hydra.searchpath=[pkg://engine.conf,file://{tmp_path}]", "experiment=typo"
    )
    assert text.startswith("model.widht: unknown key (did you mean model.widths?)")


def test_typo_in_a_list_item_names_its_index(make_cfg) -> None:
    cfg = make_cfg()
    with open_dict(cfg):
        cfg.transforms.train[0].sise = 32
    with pytest.raises(ConfigError, match=r"^transforms\.train\[0\]\.sise: unknown key"):
        validate_config(cfg)


def test_kwargs_target_accepts_any_key(make_cfg) -> None:
    validate_config(make_cfg("model=resnet18", "+model.zero_init_residual=true"))


def test_ints_pass_for_floats_and_numbers_for_str(make_cfg) -> None:
    validate_config(make_cfg("optimizer.lr=1", "trainer.precision=32", "loader.timeout=5"))


def test_only_the_keys_the_model_builder_fills_may_stay_missing(make_cfg) -> None:
    validate_config(make_cfg())  # small_cnn: num_classes and input_shape are ???
    validate_config(make_cfg("model=gru"))  # num_classes and vocab_size are ???
    assert _refused(make_cfg, "model.widths=???").startswith("model.widths=??? is a required")
    # the data fills the model's keys only: the same names elsewhere are required values
    refused = _refused(make_cfg, "+dataset.num_classes=???")
    assert refused.startswith("dataset.num_classes=??? is a required")


def test_every_problem_is_listed(make_cfg) -> None:
    text = _refused(make_cfg, "+loader.batchsize=3", "trainer.max_epochs=1.5")
    assert text.splitlines()[0].startswith("loader.batchsize: unknown key")
    assert text.splitlines()[1].startswith("trainer.max_epochs=1.5: expected int")
