"""Train a classifier (or benchmark its loader): compose, instantiate, run.

python train.py dataset=csv loader.num_workers=4
python train.py mode=benchmark loader.num_workers=auto
python train.py -m loader.num_workers=0,2 loader.batch_size=32,64
python train.py +sweep=loader
"""

from __future__ import annotations

import gc
import os
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

import hydra
from omegaconf import DictConfig, OmegaConf

from src.assemble import assemble
from src.modes import METRICS_BY_MODE
from src.modes.benchmark import benchmark
from src.modes.inspect import inspect
from src.outputs import finish_run, log_config_tree, save_resolved_config
from src.sweeps.summary import previous_result, rank_metric
from src.training.checkpoint import save_checkpoint
from src.training.loop import Fitter, build_optimization
from src.training.summary import summarize
from src.training.tensorboard import TensorBoardLogger
from src.utils.resolvers import register_resolvers


def train(cfg: DictConfig) -> dict[str, Any]:
    """Train and evaluate as `cfg` says; returns the final metrics (also in metrics.json)."""
    start = time.perf_counter()
    out = Path(cfg.paths.output_dir)
    resolved = save_resolved_config(cfg, out)
    parts = assemble(cfg)
    optimizer, scheduler = build_optimization(cfg.optimizer, cfg.scheduler, parts)
    with TensorBoardLogger(out / "tensorboard") as tb:
        fitter = Fitter(parts, optimizer, scheduler, tb)
        tb.text("config", OmegaConf.to_yaml(resolved))
        history = fitter.fit(
            on_epoch_end=lambda epoch, metrics: save_checkpoint(
                out / "checkpoints" / "last.pt",
                fitter.state(epoch) | {"metrics": metrics, "classes": parts.classes,
                                       "config": resolved},
            )
        )  # fmt: skip
        metrics = summarize(history, wall_s=time.perf_counter() - start)
        finish_run(out, tb, resolved, metrics)
    return metrics


MODES: dict[str, Callable[[DictConfig], dict[str, Any]]] = {
    "train": train,
    "benchmark": benchmark,
    "inspect": inspect,
}


@hydra.main(version_base="1.3", config_path="conf", config_name="config")
def main(cfg: DictConfig) -> float:
    """Hydra entry point; returns the ranking metric (summary.rank_by) for sweepers."""
    if cfg.mode not in MODES:
        raise ValueError(f"mode={cfg.mode!r}; expected one of {sorted(MODES)}.")
    if rank_metric(cfg) not in METRICS_BY_MODE[cfg.mode]:
        choices = list(METRICS_BY_MODE[cfg.mode])
        raise ValueError(
            f"summary.rank_by={cfg.summary.rank_by!r} is not a metric of mode={cfg.mode}: "
            f"use one of {choices}."
        )
    log_config_tree()
    try:
        metrics = previous_result(cfg) or MODES[cfg.mode](cfg)
    except BaseException as err:
        # Hydra keeps a failed job's exception until the sweep ends; drop the frames' locals
        # so the job's DataLoader workers shut down now instead of piling up.
        traceback.clear_frames(err.__traceback__)
        gc.collect()
        raise
    return metrics[rank_metric(cfg)]


if __name__ == "__main__":  # required for spawn-started loader workers (Windows, macOS)
    os.environ.setdefault("PROJECT_ROOT", str(Path(__file__).resolve().parent))
    register_resolvers()
    main()
