"""What the HParams tab lists for a run: the choices that tell runs apart, not the whole config.

Columns, in this order: the choice of each main config group (dataset=imagefolder,
model=small_cnn, ...; groups chosen on the command line too), every key set on the command
line or swept (optimizer.lr, ...), the main loader, optimizer and trainer settings, and the
values the run took from its data (data.num_classes, data.input_shape, data.classes). The
metrics are the last points of the run's own curves (no extra single-point charts).

Each run is named in the table (its Trial ID) by `trial_name`: TensorBoard's own name, the
run's path under --logdir, starts with the same date for every run and is cut there. A sweep
job writes no columns of its own: the sweep writes them when it ends, with the swept keys
first and without those every job shares (engine/sweeps/board.py).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from hydra.core.hydra_config import HydraConfig
from hydra.types import RunMode
from omegaconf import OmegaConf

from engine.runs.tensorboard_index import short_overrides

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
# where or how a run is kept or logged, or what it may instantiate: not what it is
NOT_CHOICES = (
    "hydra",
    "paths",
    "summary",
    "mode",
    "logger",
    "local",
    "allowed_targets",
    "allowed_targets_extra",
    "allowed_targets_engine",
)
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


def in_sweep() -> bool:
    """Whether this run is a job of a multirun (its sweep writes the HParams columns)."""
    return HydraConfig.initialized() and HydraConfig.get().mode == RunMode.MULTIRUN


def trial_name() -> str:
    """The run's short name in the HParams table: a sweep job's folder, then its sweep's
    (`3_batch_size=64,num_workers=2 12-30-00_ef34gh`); a single run's folder, then its
    command line's overrides (`12-00-00_ab12cd lr=0.01`); "" when composed outside train.py
    (TensorBoard names it by its path then)."""
    if not HydraConfig.initialized():
        return ""
    hydra_cfg = HydraConfig.get()
    run_dir = Path(hydra_cfg.runtime.output_dir)
    if in_sweep():
        return f"{run_dir.name} {Path(hydra_cfg.sweep.dir).name}"
    return f"{run_dir.name} {short_overrides(list(hydra_cfg.overrides.task))}".strip()


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
