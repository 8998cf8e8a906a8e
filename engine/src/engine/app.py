"""The frame train.py runs in: the checks before any work, the dispatch on `mode`, and the
process set-up of a launch (resolvers, torchrun's process group, the project root).

The template passes in what it owns: its training function (mode=train) and its step class
(mode=benchmark times it). Every other mode is the engine's.
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf

from engine.config.choices import log_config_tree
from engine.config.command_line import errors_said_once
from engine.config.errors import ConfigError
from engine.config.help_groups import config_groups
from engine.config.local_config import check_local_config
from engine.config.search_path import check_search_path
from engine.config.validate import validate_config
from engine.core.failures import failures_reported
from engine.core.launch import job_dir, launch_id, launch_rank, launch_time
from engine.data.decode_policy import move_old_keys, moved_overrides
from engine.modes import benchmark, cache, evaluation, inspect, prediction, shards, validate
from engine.runs.bookends import bookends
from engine.runs.loggers.build import logger_problems
from engine.runs.run_lock import config_subdir, log_file, run_dir_held
from engine.runs.run_state import step_class_problem
from engine.sweeps.direction import direction_of, direction_problem
from engine.sweeps.reuse import previous_result
from engine.sweeps.summary import headline
from engine.training.distributed import distributed_job, init_distributed

Run = Callable[[DictConfig], dict[str, Any]]
log = logging.getLogger(__name__)
_moved_said: str | None = None  # the command line's old decode keys (`launch`), said by `run`


def modes(train: Run, step: type) -> dict[str, Run]:
    """What `mode=` can be: the template's `train`, and the engine's modes (benchmark times
    the template's `step` class)."""
    return {
        "train": train,
        "eval": evaluation.evaluate_checkpoint,
        "predict": prediction.predict,
        "benchmark": partial(benchmark.benchmark, step=step),
        "inspect": inspect.inspect,
        "validate": validate.validate,
        "cache": cache.cache,
        "shards": shards.shards,
    }


def run(cfg: DictConfig, train: Run, step: type) -> float:
    """Check `cfg`, then run its mode; returns the ranking metric (summary.rank_by) for
    sweepers. A bad config stops before any work; the error that stops a run is one line,
    and the run dir is the first and the last line of its log (engine/runs/bookends.py)."""
    with run_dir_held(cfg.mode), bookends(cfg) as ends, failures_reported():
        if _moved_said:  # the command line's, said once logging is set up (the run's log too)
            log.warning(_moved_said)
        move_old_keys(cfg.dataset, "your config (conf/dataset/*.yaml, an experiment)")
        validate_config(cfg)
        ends.checked()  # outputs/latest, latest_<mode>
        if cfg.mode == "train":  # a logger's missing package stops the run here, not at its end
            _raise_if(logger_problems(cfg))
        problem = direction_problem(cfg)
        if problem is not None:
            raise ConfigError(problem)
        unfit = step_class_problem(step, cfg.mode, cfg.get("benchmark", {}).get("compute"))
        if unfit is not None:  # before any work: the step contract, engine.api.Step
            raise TypeError(unfit)
        if cfg.mode != "train" and init_distributed().world_size > 1:
            raise ValueError(
                f"mode={cfg.mode} runs in one process: start it with python train.py, not "
                "torchrun (or a launcher with several tasks)."
            )
        log_config_tree()
        metrics = previous_result(cfg) or modes(train, step)[cfg.mode](cfg)
    return headline(cfg, metrics)


def _raise_if(problems: list[str]) -> None:
    if problems:
        raise ConfigError("\n".join(problems))


def register_resolvers() -> None:
    """Register `${launch_time:FMT}`, `${run_id:}`, `${job_dir:...}`, `${null_if_set:A,B}`,
    `${sweep_direction:}`, `${run_log:PATH}`, `${run_subdir:MODE}`, `${if_rank_zero:A,B}` and
    `${config_groups:KIND}`; safe to call again."""
    # The launch time formatted by FMT (strftime); rank 0's under torchrun, like ${now:} otherwise.
    OmegaConf.register_new_resolver(
        "launch_time", lambda pattern: launch_time().strftime(pattern), use_cache=True, replace=True
    )
    # A random tag, fixed for the life of the config, that keeps run and sweep dirs unique
    # when two runs start in the same second (rank 0's under torchrun).
    OmegaConf.register_new_resolver("run_id", launch_id, use_cache=True, replace=True)
    OmegaConf.register_new_resolver("job_dir", job_dir, replace=True)
    # null when A is set, else B: a default that gives way to an alternative key (dataset=csv's
    # demo train_csv/val_csv give way to dataset.csv)
    OmegaConf.register_new_resolver(
        "null_if_set", lambda given, default: None if given is not None else default, replace=True
    )
    # minimize or maximize: the direction that improves the metric the sweep ranks by
    OmegaConf.register_new_resolver(
        "sweep_direction", lambda *, _root_: direction_of(_root_), replace=True
    )
    # The run's log file, once its run dir is claimed: one run at a time per folder
    OmegaConf.register_new_resolver("run_log", log_file, replace=True)
    # A on global rank 0 (and in a single process), B on the other ranks of a distributed job.
    OmegaConf.register_new_resolver(
        "if_rank_zero", lambda a, b: a if launch_rank() == 0 else b, replace=True
    )
    OmegaConf.register_new_resolver("run_subdir", config_subdir, replace=True)
    # The config groups of the whole search path, one line each: train.py --help's list
    OmegaConf.register_new_resolver("config_groups", config_groups, replace=True)


def launch(main: Callable[[], Any], script: str) -> None:
    """Run Hydra's `main` as the process `script` (train.py) starts: PROJECT_ROOT is the
    script's folder, launchers that start new processes (submitit) import from it too, the
    resolvers are registered, this machine's conf/local/default.yaml is checked
    (engine/config/local_config.py), and under torchrun the ranks share a process group and
    one run dir."""
    os.environ.setdefault("PROJECT_ROOT", str(Path(script).resolve().parent))
    os.environ["PYTHONPATH"] = os.pathsep.join(
        filter(None, [os.environ["PROJECT_ROOT"], os.environ.get("PYTHONPATH")])
    )
    register_resolvers()
    global _moved_said
    sys.argv[1:], _moved_said = moved_overrides(sys.argv[1:])  # engine 2.x's decode keys
    with errors_said_once(), distributed_job():
        check_search_path(Path(script).resolve().parent, sys.argv[1:])
        check_local_config(Path(script).resolve().parent / "conf", sys.argv[1:])
        main()
