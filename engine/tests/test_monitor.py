"""trainer.checkpoint.monitor and mode left null follow the metrics group (resolve_monitor);
values set by hand are kept; early stopping counts the epochs since the monitor's best."""

from __future__ import annotations

import pytest
from hydra.utils import instantiate
from omegaconf import OmegaConf

from engine.training.early_stopping import epochs_since_best
from engine.training.settings import CheckpointSettings, TrainerSettings, resolve_monitor
from tests.conftest import REFERENCE


def _settings(monitor: str | None, mode: str | None) -> TrainerSettings:
    node = OmegaConf.load(REFERENCE / "conf" / "trainer" / "default.yaml")
    node.checkpoint.monitor, node.checkpoint.mode = monitor, mode
    return instantiate(node)


@pytest.mark.parametrize(
    ("monitor", "mode", "names", "resolved"),
    [
        (None, None, ["acc"], ("val/acc", "max")),  # metrics=default
        (None, None, ["map", "f1", "subset_acc"], ("val/map", "max")),  # metrics=multilabel
        (None, None, [], ("val/loss", "min")),  # no metrics: the loss, lower is better
        ("val/loss", None, ["acc"], ("val/loss", "min")),
        ("train/loss", None, ["acc"], ("train/loss", "min")),
        ("val/ema_loss", None, ["acc"], ("val/ema_loss", "min")),  # the EMA's loss: a loss
        ("val/f1", None, ["map", "f1"], ("val/f1", "max")),
        ("val/acc", "min", ["acc"], ("val/acc", "min")),  # set by hand: kept
        (None, "min", ["acc"], ("val/acc", "min")),
        ("val/loss", "max", [], ("val/loss", "max")),
    ],
)
def test_a_null_monitor_and_mode_follow_the_metrics_group(
    monitor: str | None, mode: str | None, names: list[str], resolved: tuple[str, str]
) -> None:
    settings = resolve_monitor(_settings(monitor, mode), names)
    assert (settings.checkpoint.monitor, settings.checkpoint.mode) == resolved


def test_a_mode_that_is_neither_max_nor_min_is_refused_naming_the_key() -> None:
    with pytest.raises(ValueError, match=r"^trainer\.checkpoint\.mode='best': expected max or min"):
        CheckpointSettings(3, None, "best", every_n_steps=0, every_minutes=0)


def test_epochs_since_best() -> None:
    history = [{"m": v} for v in (0.5, 0.7, 0.7, 0.6)]
    assert epochs_since_best(history, "m", "max") == (2, 2)  # the first 0.7 is the best
    assert epochs_since_best(history, "m", "min") == (3, 1)
