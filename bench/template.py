"""The template's own path, exactly as `python train.py ...` builds it: conf/ composed with
overrides, validated, then `engine.training.assemble.assemble` (datasets, seeding wrapper,
loaders)."""

from __future__ import annotations

import logging
import tempfile
from collections.abc import Iterator
from functools import cache
from pathlib import Path
from typing import Any

from hydra import compose, initialize_config_dir
from omegaconf import DictConfig

from bench.timing import Candidate, touch
from engine.app import register_resolvers
from engine.config.validate import validate_config
from engine.data.loaders import endless
from engine.training.assemble import Components, assemble
from engine.training.batches import BatchMover, mover_for

CONF_DIR = Path(__file__).resolve().parents[1] / "conf"


@cache
def _run_dir() -> str:
    """The run dir of every config this process composes: made once, on the first (importing
    this module, as a forkserver preloading a benchmark's main does, makes none)."""
    return tempfile.mkdtemp(prefix="bench-run-")


def template_config(*overrides: str) -> DictConfig:
    """conf/config.yaml with `overrides` (command-line syntax), checked like train.py does."""
    register_resolvers()
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        cfg = compose(
            config_name="config", overrides=[f"paths.output_dir={_run_dir()}", *overrides]
        )
    validate_config(cfg)
    return cfg


def build(cfg: DictConfig) -> Components:
    """`assemble(cfg)` with its INFO lines kept out of the benchmark's output."""
    quiet = [
        logging.getLogger(name) for name in ("engine.training.assemble", "engine.data.loaders")
    ]
    levels = [logger.level for logger in quiet]
    for logger in quiet:
        logger.setLevel(logging.WARNING)
    try:
        return assemble(cfg)
    finally:
        for logger, level in zip(quiet, levels, strict=True):
            logger.setLevel(level)


def template_candidate(name: str, cfg: DictConfig, split: str, normalise: bool) -> Candidate:
    """The configured train or val loader, built from scratch on every start; with `normalise`
    each batch goes through the loop's BatchMover (model-ready float inputs), else the uint8
    batch is what is consumed (normalised later on the device)."""
    moves: list[BatchMover] = []

    def start() -> Iterator[Any]:
        parts = build(cfg)
        moves[:] = [mover_for(parts)]
        return endless(parts.train_loader if split == "train" else parts.val_loader)

    def finish(batch: Any) -> None:
        touch(moves[0](batch).inputs if normalise else batch[0])

    return Candidate(name, start, finish)
