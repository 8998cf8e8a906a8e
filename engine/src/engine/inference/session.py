"""What a run on a checkpoint (mode=eval, mode=predict) works with, built from the checkpoint
and this run's config: the merged config, the model on the training's device and precision,
the training's val transforms, and loaders with the training's loader settings."""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import torch
from hydra.utils import instantiate
from omegaconf import DictConfig, OmegaConf
from torch import nn
from torch.utils.data import DataLoader, Dataset

from engine.config.errors import ConfigError
from engine.config.validate import validate_config
from engine.core.seeding import seed_everything
from engine.core.text import shown
from engine.data.image_header import PILLOW_MAX_PIXELS
from engine.data.resolve_loader import resolve_loader_settings
from engine.data.samplers import SequentialOrder
from engine.data.transforms import Pipelines
from engine.inference.checkpoint import (
    BUILT,
    given,
    image_sides,
    read_checkpoint,
    run_config,
    task_overrides,
)
from engine.inference.indexed import indexed_loader
from engine.inference.model import build, rebuild_model
from engine.runs.bookends import latest_run
from engine.runs.checkpoint_files import CheckpointError
from engine.runs.checkpoint_weights import saved_monitor
from engine.runs.outputs import DATA_KEY, write_resolved_config
from engine.training.batches import BatchMover
from engine.training.device import PRECISIONS, Precision, resolve_device, resolve_precision

log = logging.getLogger(__name__)


@dataclass
class CheckpointSession:
    """A checkpoint made ready to run: `cfg` is the run's config (the checkpoint's, with the
    keys the command line set), `data` the values the training took from its data."""

    cfg: DictConfig
    file: Path
    data: dict[str, Any]
    device: torch.device
    precision: Precision
    pipelines: Pipelines
    model: nn.Module
    out: Path

    @property
    def classes(self) -> list[str]:
        """Class names in output order."""
        return list(self.data["classes"])

    def loader(self, dataset: Dataset, split: str) -> DataLoader:
        """Every sample of `dataset` in order, batches ending with their indices, with the
        training's loader settings (workers, batch size, pinning) resolved for this host."""
        settings = resolve_loader_settings(
            instantiate(self.cfg.loader), dataset, SequentialOrder, cuda=self.device.type == "cuda"
        )
        return indexed_loader(dataset, settings, split, self.out)

    def mover(self, loader: DataLoader) -> BatchMover:
        """Batches to the device and normalised there, as the training moved them."""
        layout = bool(self.cfg.trainer.channels_last)
        workers = loader.num_workers > 0
        return BatchMover(self.device, self.pipelines.normalizer, layout, beside_workers=workers)


def open_checkpoint(
    cfg: DictConfig, path: str | None, key: str, builds: Sequence[str] = BUILT
) -> CheckpointSession:
    """Load the checkpoint `path` (set by config key `key`: a file, a run dir meaning its
    best.pt, else last.pt, or `latest`: the newest training run's dir) as hostile input (the
    sections of its config the run `builds` run no command and reach no network:
    `read_checkpoint`), check its config as any config is checked (allowed_targets is this
    run's), write it as this run's config_resolved.yaml and rebuild its model."""
    if path is None:
        raise ValueError(
            f"{key} is null: set it to a checkpoint file or a run dir, e.g. "
            f"{key}=outputs/runs/2026-05-01/12-00-00_ab12cd (its best.pt)."
        )
    latest = path == "latest"
    if latest:
        path = str(latest_run(Path(cfg.paths.log_dir), "train", key))
    overrides = task_overrides()
    read = read_checkpoint(path, key, builds, overrides)
    file, state = read.file, read.state
    if latest:  # which run `latest` meant, before anything is measured on it
        log.info("%s=latest: %s", key, describe_run(Path(path), file, state))
    run_cfg = run_config(cfg, read.config, overrides, file)
    try:  # the checkpoint's _target_s too, before anything is imported
        validate_config(run_cfg)
    except ConfigError as err:
        raise ConfigError(f"checkpoint {file}: {err}") from None
    transforms = OmegaConf.to_container(run_cfg.transforms)
    pixels = OmegaConf.select(run_cfg, "dataset.decode.max_image_pixels", default=PILLOW_MAX_PIXELS)
    image_sides(transforms, pixels, file)
    settings = instantiate(run_cfg.trainer)
    device = resolve_device(settings.device)
    fp16 = PRECISIONS.get(str(settings.precision)) is torch.float16
    if fp16 and device.type == "cpu" and not given("trainer.precision", overrides):
        log.info("%s: its trainer.precision=16-mixed is emulated on the CPU: run at 32", file)
        run_cfg.trainer.precision = "32"  # what this run's config_resolved.yaml says too
        settings = replace(settings, precision="32")
    out = Path(cfg.paths.output_dir)
    write_resolved_config(OmegaConf.to_container(run_cfg), out)  # type: ignore[arg-type]
    seed_everything(settings.seed)
    layout = torch.channels_last if settings.channels_last else torch.preserve_format
    model_cfg = {"model": OmegaConf.to_container(run_cfg.model)}
    try:
        model = rebuild_model(model_cfg, state, file).to(device, memory_format=layout)
    except CheckpointError as err:
        given_model = [
            o for o in overrides if o.lstrip("+~").split("=")[0].split(".")[0] == "model"
        ]
        if not given_model:
            raise
        raise CheckpointError(
            f"{' '.join(given_model)} on the command line builds another model than the one "
            f"the checkpoint's weights are of: drop it (eval and predict build the checkpoint's "
            f"own model). {err}"
        ) from None
    data = OmegaConf.to_container(run_cfg[DATA_KEY])
    log.info(
        "checkpoint %s (epoch %s, step %s) | %d classes | device %s | precision %s",
        file,
        state.get("epoch", 0),
        state.get("step", 0),
        len(data["classes"]),  # type: ignore[index]
        device,
        settings.precision,
    )
    return CheckpointSession(
        run_cfg,
        file,
        data,  # type: ignore[arg-type]
        device,
        resolve_precision(settings.precision, device),
        build(transforms, "transforms", file),  # type: ignore[arg-type]
        model,
        out,
    )


def describe_run(run_dir: Path, file: Path, state: dict[str, Any]) -> str:
    """A training `run_dir` in a few words: when it ran, its epochs, its best monitored value,
    and which of its checkpoints is used (`file`)."""
    history = state.get("history") if isinstance(state.get("history"), list) else []
    monitor, best = saved_monitor(state), state.get("best")
    scored = (
        f"best {monitor} {best:.4g}" if monitor and isinstance(best, float | int) else "no best yet"
    )
    when = time.strftime("%Y-%m-%d %H:%M", time.localtime(file.stat().st_mtime))
    return (
        f"{shown(run_dir)} (the newest training outside sweeps; saved {when} at step "
        f"{state.get('step', 0)}, {len(history)} epoch{'s' * (len(history) != 1)} finished, "
        f"{scored}), its {file.name}"
    )
