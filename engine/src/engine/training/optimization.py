"""The optimizer and the learning-rate schedule over the whole run."""

from __future__ import annotations

import inspect
import math
from typing import TYPE_CHECKING, Any

import torch
from hydra.utils import instantiate
from omegaconf import DictConfig
from torch.utils.data import DataLoader

from engine.core.optimizer_keys import GROUP_KEYS
from engine.training.batches import batches_per_epoch
from engine.training.param_groups import param_groups
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


def total_optimizer_steps(parts: Components) -> int:
    """The optimizer steps of the whole run: what a learning-rate schedule spans (the
    scheduler group's `total_steps`), for a loop that builds its own optimizer too."""
    return parts.settings.max_epochs * optimizer_steps_per_epoch(parts.train_loader, parts.settings)


def build_optimizer(optimizer_cfg: DictConfig, model: torch.nn.Module) -> torch.optim.Optimizer:
    """The `optimizer` group's optimizer over `model`'s parameter groups (`param_groups`:
    the group's `weight_decay`, `layer_decay` and `no_decay_norm_bias`; the optimizer class
    gets the rest of its keys)."""
    groups = {key: optimizer_cfg[key] for key in GROUP_KEYS if key in optimizer_cfg}
    make = instantiate({k: v for k, v in optimizer_cfg.items() if k not in GROUP_KEYS})
    given = {**_defaults(make.func), **make.keywords}
    if "lr" not in given:
        raise ValueError(
            f"optimizer: {optimizer_cfg._target_} takes no lr, which the parameter groups scale "
            "(optimizer.layer_decay) and the schedule follows: name an optimizer that has one."
        )
    return make(param_groups(model, given["lr"], given.get("weight_decay") or 0.0, **groups))


def build_optimization(
    optimizer_cfg: DictConfig, scheduler_cfg: DictConfig, parts: Components
) -> tuple[torch.optim.Optimizer, torch.optim.lr_scheduler.LRScheduler]:
    """The `optimizer` over the model's parameter groups (`build_optimizer`) and the
    `scheduler` over the whole run (`total_optimizer_steps`)."""
    optimizer = build_optimizer(optimizer_cfg, parts.model)
    return optimizer, instantiate(scheduler_cfg)(
        optimizer, total_steps=total_optimizer_steps(parts)
    )


def _defaults(function: Any) -> dict[str, Any]:
    """The keyword defaults of `function` (an optimizer class: its lr, weight_decay)."""
    parameters = inspect.signature(function).parameters.values()
    return {p.name: p.default for p in parameters if p.default is not inspect.Parameter.empty}
