"""mode=train: fit the model (resuming when trainer.resume says so) and record the results."""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf

from engine.core.io import remove_stale_temporaries
from engine.runs.board_history import ResumedHistory
from engine.runs.checkpoint_checks import RunShape
from engine.runs.checkpoint_files import CheckpointError, Checkpoints
from engine.runs.outputs import (
    finish_run,
    record_data_values,
    save_resolved_config,
    write_resolved_config,
)
from engine.runs.resume import (
    KEY_FILE,
    check_stream_position,
    config_key,
    find_resume_state,
)
from engine.runs.run_dir import claim_run_dir
from engine.runs.summary import BOARD_TAGS, summarize
from engine.runs.tensorboard import TensorBoardLogger
from engine.runs.tensorboard_index import link_run
from engine.training.assemble import assemble
from engine.training.distributed import check_resume_world, init_distributed
from engine.training.optimization import build_optimization
from src.loop import Fitter

log = logging.getLogger(__name__)


def train(cfg: DictConfig) -> dict[str, Any]:
    """Train and evaluate as `cfg` says; returns the final metrics (also in metrics.json).
    Under torchrun every rank trains; rank 0 alone writes the run's files."""
    start = time.perf_counter()
    ranks = init_distributed()
    out = Path(cfg.paths.output_dir)
    resolved = save_resolved_config(cfg, out, write=False)  # written once the folder is ours
    parts = assemble(cfg)
    optimizer, scheduler = build_optimization(cfg.optimizer, cfg.scheduler, parts)
    key = config_key(resolved)  # of the config as composed (before the data's values)
    record_data_values(resolved, parts)
    every = parts.settings.checkpoint
    checkpoints = Checkpoints(
        out / "checkpoints", every.keep_last, every.monitor, every.mode, write=ranks.is_main
    )
    asked = parts.settings.resume
    fit = RunShape.of(parts.model, optimizer, parts.classes)
    resume = find_resume_state(asked, key, Path(cfg.paths.log_dir), out, fit)
    claim_run_dir(out, asked, resume, key, checkpoints)  # refuses another run's folder
    if ranks.is_main:
        write_resolved_config(resolved, out)
        (out / "checkpoints").mkdir(parents=True, exist_ok=True)
        removed = remove_stale_temporaries(out / "checkpoints")
        if removed:
            log.info(
                "removed %d temporary file(s) of checkpoint writes that were cut short "
                "(kill -9) from %s",
                removed,
                out / "checkpoints",
            )
        (out / "checkpoints" / KEY_FILE).write_text(key + "\n")
    history = ResumedHistory(*resume) if resume is not None and ranks.is_main else None
    with TensorBoardLogger(out / "tensorboard", enabled=ranks.is_main) as tb:
        if history is not None:
            history.carry(tb)  # one training, one TensorBoard run
        if ranks.is_main:
            link_run(cfg, tb.log_dir)
        run_info = {
            "classes": parts.classes,
            "config": resolved,
            "config_key": key,
            "world_size": ranks.world_size,
            "num_workers": parts.train_loader.num_workers,
        }
        history_file = out / "history.csv" if ranks.is_main else None
        fitter = Fitter(parts, optimizer, scheduler, tb, checkpoints, run_info, history_file)
        if resume is not None:
            check_resume_world(resume[1], ranks)
            check_stream_position(resume[1], parts.train_loader)
            restore(fitter, *resume)
            checkpoints.adopt_best(resume[0].parent / "best.pt")
            log.info(
                "resumed from %s: epoch %d, batch %d",
                resume[0],
                fitter.start_epoch,
                fitter.start_batch,
            )
        tb.text("config", OmegaConf.to_yaml(resolved))
        metrics = summarize(fitter.fit(), wall_s=time.perf_counter() - start)
        if ranks.is_main:
            finish_run(out, tb, resolved, metrics, list(BOARD_TAGS))
    return metrics


def restore(fitter: Fitter, path: Path, state: dict[str, Any]) -> None:
    """`fitter.restore(state)`; what the checks before it could not catch (an optimizer or
    scheduler of another kind) is a CheckpointError naming the file, not a raw traceback."""
    try:
        fitter.restore(state)
    except (KeyError, IndexError, TypeError, ValueError, RuntimeError) as err:
        first = str(err).strip().splitlines()[0] if str(err).strip() else ""
        raise CheckpointError(
            f"trainer.resume: {path} cannot be restored into this run "
            f"({type(err).__name__}: {first})."
        ) from err
