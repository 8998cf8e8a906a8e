"""The optimizer and the learning-rate schedule over the whole run."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import torch
from hydra.utils import instantiate
from omegaconf import DictConfig
from torch.utils.data import DataLoader

from engine.training.batches import batches_per_epoch
from engine.training.settings import TrainerSettings

if TYPE_CHECKING:
    from engine.training.assemble import Components


def optimizer_steps_per_epoch(loader: DataLoader, settings: TrainerSettings) -> int:
    """Optimizer steps in one epoch (what the LR schedule counts), at least 1."""
    batches = batches_per_epoch(loader, settings.limit_train_batches)
    if batches is None:
        raise ValueError(
            f"the train dataset ({type(loader.dataset).__name__}) has no __len__, so the "
            "learning-rate schedule cannot know the run's length: give the dataset a __len__ "
            "or set trainer.limit_train_batches."
        )
    return max(1, math.ceil(batches / settings.grad_accum))


def build_optimization(
    optimizer_cfg: DictConfig, scheduler_cfg: DictConfig, parts: Components
) -> tuple[torch.optim.Optimizer, torch.optim.lr_scheduler.LRScheduler]:
    """The `optimizer` over the model's parameters and the `scheduler` over the whole run."""
    optimizer = instantiate(optimizer_cfg)(parts.model.parameters())
    steps = parts.settings.max_epochs * optimizer_steps_per_epoch(
        parts.train_loader, parts.settings
    )
    return optimizer, instantiate(scheduler_cfg)(optimizer, total_steps=steps)
