"""Build every part a run needs from the composed config (shared by all modes)."""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import torch
from hydra.utils import instantiate
from omegaconf import DictConfig
from torch import nn
from torch.utils.data import DataLoader, Dataset

from engine.config.errors import ConfigError
from engine.config.label_kinds import label_kind_problems
from engine.core.cpus import cores_per_rank, main_threads
from engine.core.seeding import seed_everything
from engine.data.folds import write_fold_file
from engine.data.holdout import write_split_file
from engine.data.loaders import build_loaders
from engine.data.resolve_loader import resolve_loader_settings
from engine.data.seeded import seeded
from engine.data.sharing import apply_sharing_strategy
from engine.data.splits import build_splits, input_shape
from engine.data.transforms import Pipelines
from engine.data.wrapper import SubsetView
from engine.metric_keys import metric_names
from engine.training.compiled import compile_model, compile_threads
from engine.training.device import Precision, resolve_device, resolve_precision
from engine.training.distributed import init_distributed, rank_device, rank_seed, wrap_model
from engine.training.ema import WeightsEma
from engine.training.metric import AnyMetric, build_metrics
from engine.training.models import build_model, warn_if_normalised_otherwise
from engine.training.settings import TrainerSettings, resolve_monitor

log = logging.getLogger(__name__)


@dataclass
class Components:
    """What `assemble` built from the config: settings, device, data, loaders, the model, its
    loss and metrics."""

    settings: TrainerSettings
    device: torch.device
    precision: Precision
    pipelines: Pipelines
    train_set: Dataset
    val_set: Dataset
    classes: list[str]
    input_shape: tuple[int, ...]
    model: nn.Module
    criterion: nn.Module
    metrics: dict[str, AnyMetric]
    train_loader: DataLoader  # the engine's Loader (engine/data/batch_stages.py), or yours
    val_loader: DataLoader
    ema: WeightsEma | None = None  # trainer.ema.decay: the moving average of the weights
    mix: Callable[[Any, int], Any] | None = None  # batch_transforms: (batch, epoch) -> batch


def threads_origin(setting: int | None, workers: int) -> str:
    """Where the header's thread count came from: the key, or auto's arithmetic."""
    if setting is not None:
        return " (trainer.num_threads)"
    cores = cores_per_rank()
    return f" (auto: {cores} core{'s' * (cores != 1)} - {workers} worker{'s' * (workers != 1)})"


def assemble(cfg: DictConfig) -> Components:
    """Seed, pick the device, instantiate datasets, model and loaders; log a one-line header.
    Under torchrun: this rank's seed, device, DDP model and share of the data. The settings'
    checkpoint monitor is resolved against the metrics group (resolve_monitor)."""
    settings = resolve_monitor(instantiate(cfg.trainer), metric_names(cfg.metrics))
    ranks = init_distributed()
    seed_everything(rank_seed(settings.seed, ranks.rank))
    device = rank_device(resolve_device(settings.device), ranks)
    precision = resolve_precision(settings.precision, device)
    pipelines = instantiate(cfg.transforms)
    train_set, val_set = build_splits(cfg.dataset, pipelines)
    if train_set.drawn_split and ranks.is_main:
        listed = write_split_file(train_set, val_set, Path(cfg.paths.output_dir))
        log.info("train/val split drawn by dataset.val_fraction: listed in %s", listed)
    if isinstance(val_set, SubsetView) and val_set.record is not None and ranks.is_main:
        write_fold_file(val_set.record, Path(cfg.paths.output_dir))
    train_set, val_set = seeded(train_set, settings.seed), seeded(val_set, settings.seed)
    if settings.pipeline_timing is None:  # on, but where the samples are slices of memory
        settings = replace(settings, pipeline_timing=not train_set.in_memory)
    shape, classes = input_shape(val_set), train_set.classes
    model = build_model(
        cfg.model,
        num_classes=len(classes),
        input_shape=shape,
        vocab_size=train_set.vocab_size,
    )
    layout = torch.channels_last if settings.channels_last else torch.preserve_format
    model = model.to(device, memory_format=layout)
    warn_if_normalised_otherwise(model, pipelines.normalizer)
    # the EMA copies the bare model before torch.compile, which compiles it in place (its
    # state dict keeps its keys) before the DDP wrapper, as torch's DDP notes ask
    ema = WeightsEma(model, settings.ema.decay) if settings.ema.decay is not None else None
    model = wrap_model(
        compile_model(model, settings.compile), device, ranks, frozen=settings.freeze_epochs > 0
    )
    sampler = instantiate(cfg.sampler)
    loader_settings = instantiate(cfg.loader)
    apply_sharing_strategy(loader_settings)  # process-wide: set before any worker starts
    loader_settings = resolve_loader_settings(
        loader_settings, train_set, sampler, cuda=device.type == "cuda", world_size=ranks.world_size
    )
    threads = settings.num_threads or main_threads(loader_settings.num_workers)
    torch.set_num_threads(threads)  # before the first step: torch's default is every core
    compile_threads(settings.compile, threads)  # inductor's workers beside the loader's
    sizes = len(train_set), len(val_set)  # the whole splits (a stream's len becomes per rank)
    val_limit = settings.limit_val_batches
    if val_limit is not None:  # a fixed sample spread over the classes, in samples of the job
        val_limit *= loader_settings.batch_size * ranks.world_size
    train_loader, val_loader = build_loaders(
        train_set,
        val_set,
        loader_settings,
        sampler,
        report_dir=Path(cfg.paths.output_dir) if ranks.is_main else None,
        rank=ranks.rank,
        world_size=ranks.world_size,
        val_limit=val_limit,
        tag_train=settings.record_samples,
        time_train=settings.pipeline_timing,
    )
    per_step = loader_settings.batch_size * settings.grad_accum * ranks.world_size
    log.info(
        "device %s | precision %s | %d train / %d val samples | %d classes | input %s | "
        "batch %d x grad_accum %d%s = %d per step | workers %d%s | threads %d%s",
        device,
        settings.precision,
        *sizes,
        len(classes),
        shape,
        loader_settings.batch_size,
        settings.grad_accum,
        f" x {ranks.world_size} ranks" if ranks.world_size > 1 else "",
        per_step,
        loader_settings.num_workers,
        " per rank" if ranks.world_size > 1 else "",
        threads,
        threads_origin(settings.num_threads, loader_settings.num_workers),
    )
    make_loss, metrics = instantiate(cfg.loss), build_metrics(cfg.metrics)
    loss_kind = make_loss.func if isinstance(make_loss, functools.partial) else make_loss
    problems = label_kind_problems(train_set.multi_label, loss_kind, cfg.loss._target_, metrics)
    if problems:  # the config check saw the YAML; the built split decides (your own classes)
        raise ConfigError(problems[0])
    criterion = make_loss(train_set).to(device)
    mix = None  # batch_transforms: on each train batch, on the device
    if cfg.get("batch_transforms") is not None:
        if train_set.multi_label:
            raise ConfigError(
                "batch_transforms mixes the images and the labels of two samples, which for "
                "multi-label data gives no label set of either: batch_transforms=null."
            )
        mix = instantiate(cfg.batch_transforms)(num_classes=len(classes))
    return Components(
        settings,
        device,
        precision,
        pipelines,
        train_set,
        val_set,
        list(classes),
        shape,
        model,
        criterion,
        metrics,
        train_loader,
        val_loader,
        ema,
        mix,
    )
