"""What every run records: its resolved config, the final metrics (metrics.json) and HParams."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import TYPE_CHECKING, Any

from omegaconf import DictConfig, OmegaConf

from engine.config.tree import FILLED_FROM_DATA
from engine.core.io import write_json
from engine.data.targets import class_counts
from engine.runs.hparams import hparams_of, in_sweep, run_choices, trial_name
from engine.runs.tensorboard import TensorBoardLogger

if TYPE_CHECKING:
    from engine.training.assemble import Components

log = logging.getLogger(__name__)
DATA_KEY = "data"  # the section of a resolved config holding what the run took from its data


def save_resolved_config(cfg: DictConfig, out: Path, write: bool = True) -> dict[str, Any]:
    """Write config_resolved.yaml (every interpolation resolved; not with `write=False`, as on
    the other ranks of a distributed job) and return it as a dict."""
    resolved = OmegaConf.to_container(cfg, resolve=True)
    if write:
        write_resolved_config(resolved, out)  # type: ignore[arg-type]
    return resolved  # type: ignore[return-value]


def record_data_values(resolved: dict[str, Any], parts: Components) -> None:
    """Write into `resolved` what the run took from its data: the model's `???` keys
    (num_classes, input_shape, vocab_size) and a `data` section (classes, their count, the
    input shape, the vocabulary, the train split's samples per class and in all, whether the
    labels are multi-hot), so that the config
    alone rebuilds the model (engine/inference) and names its outputs."""
    targets = parts.train_set.targets
    counts = None
    if targets is not None:
        counts = class_counts(targets, len(parts.classes)).tolist()
    values = {
        "num_classes": len(parts.classes),
        "input_shape": list(parts.input_shape),
        "vocab_size": parts.train_set.vocab_size,
    }
    model = resolved["model"]
    for key in FILLED_FROM_DATA:
        if model.get(key) == "???":
            model[key] = values[key]
    resolved[DATA_KEY] = {
        "classes": list(parts.classes),
        **values,
        "class_counts": counts,
        "train_samples": None if targets is None else len(targets),  # with counts: pos_weight
        "multi_label": bool(parts.train_set.multi_label),
    }


def write_resolved_config(resolved: dict[str, Any], out: Path) -> None:
    """Write config_resolved.yaml (`resolved`: the config with interpolations resolved)."""
    out.mkdir(parents=True, exist_ok=True)
    (out / "config_resolved.yaml").write_text(OmegaConf.to_yaml(resolved))


def finish_run(
    out: Path,
    tb: TensorBoardLogger,
    resolved: dict[str, Any],
    metrics: dict[str, float],
    tags: list[str],
    step: int = 0,
) -> None:
    """Record the final metrics: metrics.json, one log line, and the run's HParams entry (its
    choices, with the scalar `tags` whose last points sum it up) at TensorBoard's `step`,
    named `trial_name()`; a sweep job's columns come from its sweep (engine/sweeps/board.py)."""
    params = hparams_of(resolved, *run_choices())
    tb.hparams(params, tags, step, trial=trial_name(), columns=not in_sweep())
    record_metrics(out, metrics)


def record_metrics(out: Path, metrics: dict[str, float]) -> None:
    """metrics.json in `out`, and the metrics' log line."""
    write_json(out / "metrics.json", metrics)
    log.info("metrics: %s", ", ".join(f"{k} {v:.4g}" for k, v in metrics.items()))
