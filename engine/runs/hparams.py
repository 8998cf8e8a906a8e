"""What the HParams tab lists for a run: the choices that tell runs apart, not the whole config.

Columns, in this order: the choice of each main config group (dataset=imagefolder,
model=small_cnn, ...; groups chosen on the command line too), every key set on the command
line or swept (optimizer.lr, ...), the main loader, optimizer and trainer settings, and the
values the run took from its data (data.num_classes, data.input_shape, data.classes). The
metrics are the last points of the run's own curves (no extra single-point charts).
"""

from __future__ import annotations

from typing import Any

from hydra.core.hydra_config import HydraConfig
from omegaconf import OmegaConf

MAIN_GROUPS = (
    "experiment",
    "dataset",
    "model",
    "transforms",
    "sampler",
    "loss",
    "optimizer",
    "scheduler",
    "collate",
    "debug",
)
MAIN_KEYS = (
    "loader.batch_size",
    "loader.num_workers",
    "optimizer.lr",
    "optimizer.weight_decay",
    "trainer.max_epochs",
    "trainer.precision",
    "trainer.seed",
    "data.num_classes",
    "data.input_shape",
    "data.classes",
)
# where or how a run is kept or logged, not what it is
NOT_CHOICES = ("hydra", "paths", "summary", "mode", "logger", "local")
MAX_TEXT = 120  # characters of a text column (a long class list is cut, ending in '…')


def flatten(tree: Any, prefix: str = "") -> dict[str, Any]:
    """Nested dicts/lists -> {"a.b": value}; lists become strings (HParams takes scalars)."""
    if isinstance(tree, dict):
        out: dict[str, Any] = {}
        for key, value in tree.items():
            out.update(flatten(value, f"{prefix}{key}."))
        return out
    value = tree if isinstance(tree, (bool, int, float, str)) or tree is None else str(tree)
    return {prefix[:-1]: value}


def run_choices() -> tuple[dict[str, str], list[str]]:
    """The config groups' choices and the command line's overrides of this run (none when
    the config was composed outside train.py, e.g. by a test)."""
    if not HydraConfig.initialized():
        return {}, []
    hydra_cfg = HydraConfig.get()
    choices = OmegaConf.to_container(hydra_cfg.runtime.choices)
    return (
        {g: str(o) for g, o in choices.items() if o is not None and "/" not in g},  # type: ignore[union-attr]
        list(hydra_cfg.overrides.task),
    )


def hparams_of(
    config: dict[str, Any], choices: dict[str, str], overrides: list[str]
) -> dict[str, Any]:
    """The HParams columns of a run with resolved `config`, group `choices` and command-line
    `overrides` (see the module docstring). Without choices (a config composed outside
    train.py) a group's choice is named by its `_target_`'s class."""
    flat = flatten(config)
    set_keys = [o.lstrip("+~").partition("=")[0] for o in overrides]
    params: dict[str, Any] = {}
    for group in (*MAIN_GROUPS, *set_keys):
        if group in NOT_CHOICES:
            continue
        if group in choices:
            params[group] = choices[group]
        elif not choices and isinstance(config.get(group), dict) and "_target_" in config[group]:
            params[group] = config[group]["_target_"].rpartition(".")[2]
    for key in (*set_keys, *MAIN_KEYS):
        if key in flat and key.split(".")[0] not in NOT_CHOICES:
            value = flat[key]
            long = isinstance(value, str) and len(value) > MAX_TEXT
            params[key] = value[: MAX_TEXT - 1] + "…" if long else value
    return params
