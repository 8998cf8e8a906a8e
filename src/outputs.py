"""Files every run leaves in its directory: resolved config, TensorBoard, metrics.json."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf

from src.training.tensorboard import TensorBoardLogger, hparams_of
from src.utils.io import write_json

log = logging.getLogger(__name__)


def save_resolved_config(cfg: DictConfig, out: Path) -> dict[str, Any]:
    """Write config_resolved.yaml (every interpolation resolved) and return it as a dict."""
    out.mkdir(parents=True, exist_ok=True)
    resolved = OmegaConf.to_container(cfg, resolve=True)
    (out / "config_resolved.yaml").write_text(OmegaConf.to_yaml(resolved))
    return resolved  # type: ignore[return-value]


def finish_run(
    out: Path, tb: TensorBoardLogger, resolved: dict[str, Any], metrics: dict[str, float]
) -> None:
    """Record the final metrics: HParams in TensorBoard, metrics.json, one log line."""
    tb.hparams(hparams_of(resolved), metrics)
    write_json(out / "metrics.json", metrics)
    log.info("metrics: %s", ", ".join(f"{k} {v:.4g}" for k, v in metrics.items()))
