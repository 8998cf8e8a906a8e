"""Every option conf/ ships passes the config check, and what only the template's own options
hold is checked in one short line naming the key: its models' and losses' bounds, its metrics
as monitors, Adam's betas, its dataset options' knobs. The checker itself on the engine's
reference project (typos, wrong types, inf and nan, bounds, `???`, broken `${...}`, every
problem listed; its types, every settings dataclass): the engine's tests/test_config_checks.py."""

from __future__ import annotations

import pytest

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
        (
            "trainer.checkpoint.monitor=val/accuracy",
            "trainer.checkpoint.monitor='val/accuracy' is not a per-epoch value of this run (did "
            "you mean val/acc?)",
        ),
        ("+optimizer.betas=[0.9,inf]", "optimizer.betas=[0.9, inf]: expected a finite number"),
        ("model.dropout=nan", "model.dropout=nan: expected a finite number"),
    ],
)
def test_bad_value_gives_one_short_message(make_cfg, override: str, message: str) -> None:
    """The template's own model (dropout), metrics (acc) and optimizer (Adam's betas)."""
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
            "dataset=parquet dataset.decode.max_jpeg_scans=-1",
            "dataset.decode.max_jpeg_scans=-1: expected >= 1",
        ),
        ("loss.label_smoothing=1", "loss.label_smoothing=1: expected >= 0 and < 1"),
        ("model.widths=[8,0]", "model.widths=[8, 0]: expected every item >= 1"),
        ("model.dropout=1.5", "model.dropout=1.5: expected >= 0 and < 1"),
        ("metrics.acc.k=0", "metrics.acc.k=0: expected >= 1"),
        ("scheduler.warmup_frac=-0.5", "scheduler.warmup_frac=-0.5: expected >= 0 and <= 1"),
        ("dataset=iterable dataset.shuffle_buffer=-1", "dataset.shuffle_buffer=-1: expected >= 0"),
        ("dataset=iterable dataset.read_timeout=0", "dataset.read_timeout=0: expected > 0"),
        ("dataset=parquet dataset.read_timeout=0", "dataset.read_timeout=0: expected > 0"),
        ("dataset=tensor dataset.val_fraction=1", "dataset.val_fraction=1: expected > 0 and < 1"),
        ("model.widths=[8,10000000000]", "model.widths=[8, 10000000000]: expected every item"),
        ("dataset=iterable dataset.read_timeout=1e30", "dataset.read_timeout=1e+30: expected"),
    ],
)
def test_a_value_out_of_its_bounds_is_one_line_before_any_work(make_cfg, override, message):
    """Bounds in the type hints of the template's own models, losses, metrics and schedules,
    and of the dataset options only its conf/ ships, checked with the config."""
    text = _refused(make_cfg, *override.split())
    assert text.startswith(message), text
    assert len(text.splitlines()) == 1


def test_kwargs_target_accepts_any_key(make_cfg) -> None:
    validate_config(make_cfg("model=resnet18", "+model.zero_init_residual=true"))


def test_only_the_keys_the_model_builder_fills_may_stay_missing(make_cfg) -> None:
    """The template's models: what its data fills (num_classes, input_shape, vocab_size)."""
    validate_config(make_cfg())  # small_cnn: num_classes and input_shape are ???
    validate_config(make_cfg("model=gru"))  # num_classes and vocab_size are ???
    assert _refused(make_cfg, "model.widths=???").startswith("model.widths=??? is a required")
