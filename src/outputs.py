"""What every run records: its config (tree and resolved file), TensorBoard, metrics.json."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig, OmegaConf

from src.training.tensorboard import TensorBoardLogger, hparams_of
from src.utils.io import write_json

log = logging.getLogger(__name__)


def save_resolved_config(cfg: DictConfig, out: Path, write: bool = True) -> dict[str, Any]:
    """Write config_resolved.yaml (every interpolation resolved; not with `write=False`, as on
    the other ranks of a distributed job) and return it as a dict."""
    resolved = OmegaConf.to_container(cfg, resolve=True)
    if write:
        write_resolved_config(resolved, out)  # type: ignore[arg-type]
    return resolved  # type: ignore[return-value]


def write_resolved_config(resolved: dict[str, Any], out: Path) -> None:
    """Write config_resolved.yaml (`resolved`: the config with interpolations resolved)."""
    out.mkdir(parents=True, exist_ok=True)
    (out / "config_resolved.yaml").write_text(OmegaConf.to_yaml(resolved))


def finish_run(
    out: Path, tb: TensorBoardLogger, resolved: dict[str, Any], metrics: dict[str, float]
) -> None:
    """Record the final metrics: HParams in TensorBoard, metrics.json, one log line."""
    tb.hparams(hparams_of(resolved), metrics)
    write_json(out / "metrics.json", metrics)
    log.info("metrics: %s", ", ".join(f"{k} {v:.4g}" for k, v in metrics.items()))


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
