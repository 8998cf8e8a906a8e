"""Train a classifier (or benchmark its loader): compose, instantiate, run.

python train.py dataset=csv loader.num_workers=4
python train.py mode=benchmark loader.num_workers=auto
python train.py -m loader.num_workers=0,2 loader.batch_size=32,64
python train.py +sweep=loader
torchrun --standalone --nproc_per_node=2 train.py    # DDP: one process per device
"""

from __future__ import annotations

import os
from pathlib import Path

import hydra
from omegaconf import DictConfig

from src.config.choices import log_config_tree
from src.config.errors import ConfigError
from src.config.validate import validate_config
from src.failures import failures_reported
from src.modes import MODES
from src.sweeps.direction import direction_problem
from src.sweeps.reuse import previous_result
from src.sweeps.summary import rank_metric
from src.training.distributed import distributed_job, init_distributed
from src.utils.resolvers import register_resolvers


@hydra.main(version_base="1.3", config_path="conf", config_name="config")
def main(cfg: DictConfig) -> float:
    """Hydra entry point; returns the ranking metric (summary.rank_by) for sweepers."""
    with failures_reported():  # the error that stops a run is the last line of its log
        validate_config(cfg)  # a bad config stops here, in a few lines, before any work
        problem = direction_problem(cfg)
        if problem is not None:
            raise ConfigError(problem)
        if cfg.mode != "train" and init_distributed().world_size > 1:
            raise ValueError(
                f"mode={cfg.mode} runs in one process: start it with python train.py, not "
                "torchrun (or a launcher with several tasks)."
            )
        log_config_tree()
        metrics = previous_result(cfg) or MODES[cfg.mode].run(cfg)
    return metrics[rank_metric(cfg)]


if __name__ == "__main__":  # required for spawn-started loader workers (Windows, macOS)
    os.environ.setdefault("PROJECT_ROOT", str(Path(__file__).resolve().parent))
    # jobs that a launcher starts as new processes (submitit: SLURM or local) import src too
    os.environ["PYTHONPATH"] = os.pathsep.join(
        filter(None, [os.environ["PROJECT_ROOT"], os.environ.get("PYTHONPATH")])
    )
    register_resolvers()
    with distributed_job():  # under torchrun: the process group and one run dir for all ranks
        main()
