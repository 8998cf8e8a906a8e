"""A training sweep over speed knobs only ranks by speed.

The engine gives a training the same samples, order and augmentations whatever the loader's
workers (engine/data/seeded.py), so jobs that differ only in the knobs below learn the same
model from the same samples: their val/acc differs by float rounding alone (the threads left to
the step change with the workers), which training amplifies (0.229 against 0.216 in a demo
sweep). Ranking them by it would recommend noise; their real difference is speed.
batch_size, shuffle, drop_last and collate_fn change what is learned and are not speed knobs.
What a sweep varies is read from its plan (multirun.yaml: the command line's sweeps and
hydra.sweeper.params, keys left out of the summary's overrides column such as paths.data_dir
included) and from the summary's rows (a rerun into the same dir adds its own plan's keys).
Only Hydra's basic sweeper: an optimizing sweeper (Optuna) picks trials by summary.rank_by's
metric, and the summary keeps to it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.errors import HydraException
from omegaconf import OmegaConf
from omegaconf.errors import OmegaConfBaseException

from engine.core.records import regular_file_bytes
from engine.sweeps.plot import swept_keys

LOADER_KNOBS = (
    "num_workers",
    "pin_memory",
    "prefetch_factor",
    "persistent_workers",
    "timeout",
    "multiprocessing_context",
    "sharing_strategy",
)
# the trainer's: the main process's threads, the memory layout, the side-stream copy, the
# stage timings and compilation change the float rounding or the speed, never the samples
TRAINER_KNOBS = ("num_threads", "channels_last", "device_prefetch", "pipeline_timing", "compile")
SPEED_KNOBS = frozenset(
    [*(f"loader.{k}" for k in LOADER_KNOBS), *(f"trainer.{k}" for k in TRAINER_KNOBS)]
)
WORKERS = "loader.num_workers"  # shards a stream otherwise: no speed knob of a stream
SPEED_METRIC = "train/samples_per_s"
PLAN = "multirun.yaml"  # Hydra writes it into the sweep dir before the first job
BASIC_SWEEPER = "hydra._internal.core_plugins.basic_sweeper.BasicSweeper"


def planned_sweeps(sweep_dir: Path) -> list[str] | None:
    """The keys the multirun in `sweep_dir` sweeps, by its plan; None when the plan cannot be
    read or another sweeper than Hydra's basic one runs it."""
    try:
        text = regular_file_bytes(sweep_dir / PLAN, 2**24, "Hydra's multirun.yaml").decode()
        plan: Any = OmegaConf.to_container(OmegaConf.create(text).hydra, resolve=False)
        if plan["sweeper"]["_target_"] != BASIC_SWEEPER:
            return None
        params = plan["sweeper"].get("params") or {}
        # as BasicSweeper reads them: the params, then the command line, the last of a key wins
        given = [*(f"{k}={v}" for k, v in params.items()), *plan["overrides"]["task"]]
        parsed = OverridesParser.create().parse_overrides(given)
    except (
        OSError,
        ValueError,  # not a regular file, too large, not UTF-8
        KeyError,
        TypeError,
        AttributeError,
        yaml.YAMLError,
        OmegaConfBaseException,
        HydraException,
    ):
        return None  # the configured metric then ranks, as before this rule
    last = {o.key_or_group: o for o in parsed}
    return [key for key, o in last.items() if o.is_sweep_override()]


def speed_only(rows: list[dict[str, str]], sweep_dir: Path, streamed: bool = False) -> list[str]:
    """The keys the sweep in `sweep_dir` (its summary `rows`) varies, when each is a speed knob;
    [] when any is not, nothing varies, or its plan says nothing (see `planned_sweeps`). Over
    a stream (`streamed`), the workers shard it: their count changes which samples a batch
    holds, so it is no speed knob there."""
    planned = planned_sweeps(sweep_dir)
    if planned is None:
        return []
    keys = list(dict.fromkeys([*swept_keys(rows), *planned]))
    knobs = SPEED_KNOBS - {WORKERS} if streamed else SPEED_KNOBS
    return keys if keys and knobs.issuperset(keys) else []


def speed_note(knobs: list[str], metric: str) -> str:
    """The line saying why a sweep over speed `knobs` ranks by `metric`."""
    return (
        f"Ranked by {metric}: the jobs differ only in speed knobs ({', '.join(knobs)}), which "
        "change how fast batches come, not what the model is shown: every job trains on the "
        "same samples in the same order with the same augmentations. Their val metrics still "
        "differ: threads, memory layout and compilation change the float rounding, and "
        "training amplifies it, so a gap between them says nothing about the knobs. One training "
        "measures its speed once: to tell close jobs apart, time them with repeats "
        "(+sweep=loader); summary.rank_by=<metric> ranks by another."
    )
