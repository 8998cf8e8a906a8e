"""`trainer.resume`: find the checkpoint to continue from (auto = latest run of this config)."""

from __future__ import annotations

import copy
import hashlib
import json
import logging
from pathlib import Path
from typing import Any

from engine.core.records import KIB, regular_file_bytes
from engine.runs.checkpoint_checks import RunShape, problem_with
from engine.runs.checkpoint_files import (
    Check,
    CheckpointError,
    load_checkpoint,
    load_newest,
)

log = logging.getLogger(__name__)

KEY_FILE = "config_key"  # in each run's checkpoints/ folder: the fingerprint below
# Keys that do not change what a run computes (placement, speed, bookkeeping): a run may be
# resumed with other values of them, e.g. more loader workers.
RESULT_NEUTRAL_KEYS = (
    "paths",
    "logger",  # where metrics are logged, not what they are
    "summary",
    "trainer.resume",
    "trainer.checkpoint",
    "trainer.log_every_n_seconds",  # progress lines in the log
    "trainer.num_threads",  # a requeued job on other cores: the same run up to float rounding
    "trainer.starvation_threshold",  # when a hint is logged
    "trainer.record_samples",  # samples.csv: which samples, not what is learned from them
    "trainer.pipeline_timing",  # pipeline/<stage>_ms: how long each stage took, not its result
    "trainer.resume_granularity",  # how a resume goes on, checked against the checkpoint
    "loader.num_workers",
    "loader.pin_memory",
    "loader.prefetch_factor",
    "loader.persistent_workers",
    "loader.timeout",
    "loader.multiprocessing_context",
    "loader.sharing_strategy",
    "dataset.retries",
    "dataset.backoff",
    "dataset.read_timeout",
    "dataset.manifest_cache",
    # what a config may instantiate, not what it does (the targets themselves are hashed)
    "allowed_targets",
    "allowed_targets_extra",
    "allowed_targets_engine",
    # the other modes' settings (a release may add keys to them): not what a training computes
    "mode",
    "eval",
    "predict",
    "benchmark",
    "inspect",
    "cache",  # mode=cache's (dataset=cache names what it reads in dataset.root)
    "shards",  # mode=shards'
)


def config_key(resolved: dict[str, Any], world_size: int = 1) -> str:
    """A fingerprint of everything in the resolved config that changes the run's results, in
    a job of `world_size` ranks: the per-rank batch and the accumulation count only through
    the global batch they make (loader.batch_size x ranks x trainer.grad_accum), so a job
    requeued on half the ranks with twice the batch size is the same run (engine/runs/
    elastic.py)."""
    config = copy.deepcopy(resolved)
    loader, trainer = config.get("loader", {}), config.get("trainer", {})
    if isinstance(loader.get("batch_size"), int) and isinstance(trainer.get("grad_accum"), int):
        batch, accum = loader.pop("batch_size"), trainer.pop("grad_accum")
        config["global_batch"] = batch * accum * world_size
    for dotted in RESULT_NEUTRAL_KEYS:
        *parents, leaf = dotted.split(".")
        node = config
        for part in parents:
            node = node.get(part, {})
        node.pop(leaf, None)
    text = json.dumps(config, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def of_this_config(key: str, run: RunShape | None = None) -> Check:
    """A `load_newest` check for trainer.resume=auto: the checkpoint's own config_key must be
    `key` (whatever folder it sits in), and it must be restorable (`problem_with`)."""

    def problem(state: dict[str, Any]) -> str | None:
        theirs = state.get("config_key")
        if theirs != key:
            return (
                f"comes from another config (config_key {theirs or 'missing'}, this run's is {key})"
            )
        return problem_with(state, run)

    return problem


def _runs_of(key: str, log_dir: Path, exclude: Path) -> list[Path]:
    """Checkpoint folders under `log_dir` (but `exclude`'s) last written by runs of `key`,
    newest last. The folder's key file only narrows the search: each checkpoint's own
    config_key decides (`of_this_config`)."""
    found = []
    for key_file in log_dir.glob(f"**/checkpoints/{KEY_FILE}"):
        folder = key_file.parent
        if folder.parent != exclude and _key_in(key_file) == key:
            steps = list(folder.glob("step*.pt"))
            if steps:
                found.append((max(p.stat().st_mtime for p in steps), folder))
    return [folder for _, folder in sorted(found)]


def _key_in(key_file: Path) -> str | None:
    """The config key a checkpoints/ folder's key file holds; None (with a warning naming it)
    when it is no regular file of a key's size (a FIFO hung the search) or not text."""
    try:
        return regular_file_bytes(key_file, 4 * KIB, "a config key file").decode().strip()
    except (OSError, ValueError) as err:  # UnicodeDecodeError is a ValueError
        log.warning("trainer.resume=auto: passing over %s (%s)", key_file, err)
        return None


def find_resume_state(
    resume: str | None,
    key: str,
    log_dir: Path,
    run_dir: Path,
    run: RunShape | None = None,
) -> tuple[Path, dict[str, Any]] | None:
    """The checkpoint `trainer.resume` asks for: null = none; auto = the newest usable one of
    this config, first in this run's own folder (a requeued job, hydra.run.dir fixed), then
    in the other runs of this config under `log_dir`, newest first; else a file or folder.

    Usable: loadable, holding every key `restore` needs with its type and range, fitting
    `run` (this run's model weights, optimizer state and data classes: `problem_with`), and
    under auto carrying this run's config_key itself. With auto or a
    folder, each unusable file is skipped with one warning line naming it and the previous
    step is tried; a file given by name that is unusable is a CheckpointError naming it."""
    if resume is None:
        return None
    if resume == "auto":
        usable = of_this_config(key, run)
        own = run_dir / "checkpoints"
        for folder in [own, *reversed(_runs_of(key, log_dir, exclude=run_dir))]:
            found = load_newest(folder, usable) if folder.is_dir() else None
            if found is not None:
                return found
        log.info(
            "trainer.resume=auto: no checkpoint of this config in %s and no earlier run "
            "of this config under %s; starting fresh.",
            own,
            log_dir,
        )
        return None
    path = Path(resume).expanduser()
    if path.is_dir():
        folder = path / "checkpoints" if (path / "checkpoints").is_dir() else path
        found = load_newest(folder, lambda state: problem_with(state, run))
        if found is None:
            raise CheckpointError(
                f"trainer.resume={resume}: no usable step*.pt checkpoint in {folder} (each "
                "one there was skipped for the reason, and the fix, its warning line above gives)."
            )
        path, state = found
    else:
        state = load_checkpoint(path)
        problem = problem_with(state, run)
        if problem is not None:
            raise CheckpointError(f"trainer.resume={path}: this file {problem}.")
    if state.get("config_key") != key:
        log.warning(
            "trainer.resume=%s: the checkpoint comes from a different config "
            "(results will not match an uninterrupted run of this one).",
            path,
        )
    return path, state
