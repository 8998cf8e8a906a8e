"""Train a classifier (or benchmark its loader): compose, check, run.

python train.py dataset=csv loader.num_workers=4
python train.py mode=benchmark loader.num_workers=auto
python train.py -m loader.num_workers=0,2 loader.batch_size=32,64
python train.py +sweep=loader
torchrun --standalone --nproc_per_node=2 train.py    # DDP: one process per device
"""

from __future__ import annotations

import hydra
from omegaconf import DictConfig

from engine.api import launch, run
from src.loop import train
from src.step import TrainStep


@hydra.main(version_base="1.3", config_path="conf", config_name="config")
def main(cfg: DictConfig) -> float:
    """Hydra entry point: `mode=train` runs src/ training, every other mode the engine's;
    returns the ranking metric (summary.rank_by) for sweepers."""
    return run(cfg, train=train, step=TrainStep)


if __name__ == "__main__":  # required for spawn-started loader workers (Windows, macOS)
    launch(main, __file__)
