"""The composed config's choices as a tree at the start of every run's log."""

from __future__ import annotations

import logging

from hydra.core.hydra_config import HydraConfig
from omegaconf import OmegaConf

log = logging.getLogger(__name__)


def config_tree(choices: dict[str, str | None], overrides: list[str]) -> str:
    """The groups' choices as a tree, each with the command-line values that changed it."""
    groups = {g: v for g, v in choices.items() if not g.startswith("hydra/") and v is not None}
    lines = ["config"]
    loose = [o for o in overrides if o.lstrip("+~").split(".")[0].split("=")[0] not in groups]
    for i, (group, option) in enumerate(groups.items()):
        changed = [o for o in overrides if o.lstrip("+~").startswith(f"{group}.")]
        last = i == len(groups) - 1 and not loose
        extra = f"  ({', '.join(changed)})" if changed else ""
        lines.append(f"{'└──' if last else '├──'} {group}: {option}{extra}")
    if loose:
        lines.append(f"└── overrides: {' '.join(loose)}")
    return "\n".join(lines)


def log_config_tree() -> None:
    """Log the composed config's choices and changed values (full config: config_resolved.yaml)."""
    if not HydraConfig.initialized():  # composed by a test or a notebook, not by @hydra.main
        return
    hydra_cfg = HydraConfig.get()
    choices = OmegaConf.to_container(hydra_cfg.runtime.choices)
    in_defaults_order = dict(reversed(list(choices.items())))  # type: ignore[union-attr]
    log.info("%s", config_tree(in_defaults_order, list(hydra_cfg.overrides.task)))
