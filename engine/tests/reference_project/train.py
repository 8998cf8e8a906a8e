"""The engine's reference project: the smallest project a user could build on the engine (a
tiny CNN, a step that keeps an EMA of the weights, a loop on Fit and Epoch). The engine's own
end-to-end tests (engine/tests/process/, test_reference_*.py) drive it, never the template's
src/: a user who rewrites their loop, step or models cannot break them.

python train.py paths.demo_dir=<a demo set (python -m engine_dev.demo)> paths.log_dir=<runs>
"""

from __future__ import annotations

import hydra
from omegaconf import DictConfig

from engine.app import launch, run
from reference.loop import train
from reference.step import EmaStep


@hydra.main(version_base="1.3", config_path="conf", config_name="config")
def main(cfg: DictConfig) -> float:
    """Run the reference project's mode=train, or an engine mode; the ranking metric back."""
    return run(cfg, train=train, step=EmaStep)


if __name__ == "__main__":
    launch(main, __file__)
