"""Which way an Optuna search optimises: derived from the metric the sweep ranks by
(summary.rank_by, else the mode's headline metric), so the search and the summary table agree."""

from __future__ import annotations

from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig, OmegaConf

from engine.metric_keys import lower_is_better
from engine.sweeps.summary import rank_metric


def direction_of(config: DictConfig) -> str:
    """`minimize` when the ranking metric is better lower (a loss, a time), else `maximize`."""
    return "minimize" if lower_is_better(rank_metric(config)) else "maximize"


def direction_problem(config: DictConfig) -> str | None:
    """Why a sweeper's `direction` set by hand contradicts the ranking metric (None: it does
    not, it is derived by conf/sweep/optuna.yaml, or there is no such sweeper)."""
    if not HydraConfig.initialized():
        return None
    sweeper = OmegaConf.to_container(HydraConfig.get().sweeper, resolve=False)
    given = sweeper.get("direction")  # type: ignore[union-attr]
    if not isinstance(given, str) or given.startswith("${"):
        return None  # multi-objective lists, other sweepers, or the derived default
    expected = direction_of(config)
    if given == expected:
        return None
    return (
        f"hydra.sweeper.direction={given}, but the sweep ranks by {rank_metric(config)} "
        f"(summary.rank_by), which calls for {expected}: set hydra.sweeper.direction="
        f"{expected}, or leave it to conf/sweep/optuna.yaml, which derives it."
    )
