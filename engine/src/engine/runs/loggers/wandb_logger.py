"""logger=wandb: a Weights & Biases run per training run dir, its files in <run dir>/wandb.
`mode: offline` (the default) writes them only (`wandb sync <run dir>/wandb/offline-run-*`
uploads them later); online needs `wandb login`. Config: the resolved config; history: every
scalar at its optimizer step (W&B's step); summary: the final metrics. A resumed training is
a new W&B run, with the checkpoint's run dir in its config.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

import torch

from engine.runs.loggers.base import Logger, RunContext

INSTALL = "pip install -e '.[loggers]'"


class WandbLogger(Logger):
    """A W&B run in `project` of `entity` (null: wandb's defaults), named `name` (null: the
    run dir's name), in `mode` online, offline or disabled."""

    requires = ("wandb", INSTALL)

    def __init__(
        self,
        run: RunContext,
        mode: Literal["online", "offline", "disabled"] = "offline",
        project: str | None = None,
        entity: str | None = None,
        name: str | None = None,
    ) -> None:
        import wandb

        self.wandb = wandb
        self.run = wandb.init(
            mode=mode,
            project=project,
            entity=entity,
            name=name or run.out.name,
            dir=str(run.out),
            config=run.config,
            settings=wandb.Settings(console="off"),  # the run's log stays Hydra's alone
        )
        self.ended = False

    def scalars(self, values: dict[str, float], step: int) -> None:
        self.run.log(dict(values), step=step)

    def image(self, tag: str, image: torch.Tensor, step: int = 0) -> None:
        pixels = (image.float().clamp(0, 1) * 255).byte().permute(1, 2, 0).cpu().numpy()
        self.run.log({tag: self.wandb.Image(pixels)}, step=step)

    def resumed(self, previous: Path) -> None:
        self.run.config.update({"resumed_from": str(previous)})

    def finish(self, metrics: dict[str, float], step: int) -> None:
        self.run.summary.update(metrics)
        self._end(0)

    def close(self) -> None:
        self._end(1)  # closed without finish: the training failed

    def _end(self, exit_code: int) -> None:
        if not self.ended:
            self.run.finish(exit_code=exit_code)
            self.ended = True
