"""What every run records: its resolved config, the final metrics (metrics.json) and HParams."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

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
