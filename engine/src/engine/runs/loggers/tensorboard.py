"""logger=tensorboard: the run's tensorboard/ folder, as engine/runs/tensorboard.py writes it
(scalars, the first batch's grid, the config text, the HParams entry; a resumed training stays
one TensorBoard run: purge_step, and the earlier run dir's events taken over)."""

from __future__ import annotations

from pathlib import Path

from omegaconf import OmegaConf

from engine.runs.hparams import in_sweep, trial_name
from engine.runs.loggers.base import Logger, RunContext
from engine.runs.summary import board_tags
from engine.runs.tensorboard import TensorBoardLogger, take_over_events
from engine.runs.tensorboard_index import link_run

FOLDER = "tensorboard"  # in the run dir


class TensorBoard(TensorBoardLogger, Logger):
    """TensorBoard in `<run dir>/tensorboard`, linked into the index `make tensorboard` serves:
    the writer's own scalars, image, text, flush and close. What an interrupted training wrote
    at or past `run.start_step` is purged."""

    def __init__(self, run: RunContext) -> None:
        super().__init__(run.out / FOLDER, purge_step=run.start_step)
        self.params = run.params
        link_run(run.cfg, self.log_dir)
        self.text("config", OmegaConf.to_yaml(run.config), run.start_step)

    def resumed(self, previous: Path) -> None:
        take_over_events(previous / FOLDER, self.log_dir)

    def finish(self, metrics: dict[str, float], step: int) -> None:
        """The HParams entry: the run's choices, summed up by the last points of its curves."""
        trial, columns = trial_name(), not in_sweep()  # a sweep writes its jobs' columns
        self.hparams(self.params, board_tags(metrics), step, trial=trial, columns=columns)
