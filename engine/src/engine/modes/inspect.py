"""`mode=inspect`: look at the first batches before training, where most pipeline mistakes show.

Prints shapes, dtypes, value ranges and per-channel statistics of what the model will see,
label histograms and the effective loader settings, warns about the classic mistakes it can
detect, and saves an image grid per split into the run directory (each tile over its class name).
"""

from __future__ import annotations

import logging
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from hydra.utils import instantiate
from omegaconf import DictConfig
from torch.utils.data import DataLoader
from torchvision.transforms import v2
from torchvision.utils import save_image

from engine.core.bounds import Positive
from engine.core.grid import labelled_grid
from engine.core.io import write_json
from engine.data.loaders import RANDOM_ORDERS
from engine.data.targets import class_counts
from engine.runs.outputs import save_resolved_config
from engine.training.assemble import Components, assemble
from engine.training.batches import BatchMover, mover_for

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class InspectSettings:
    """The `inspect` config group (see engine/conf/inspect/default.yaml)."""

    batches: Positive
    images: Positive


def split_report(name: str, loader: DataLoader, move: BatchMover, batches: int) -> dict[str, Any]:
    """Statistics of the first `batches` batches of `loader`, as the model receives them."""
    inputs, labels = [], []
    for i, batch in enumerate(loader):
        if i == batches:
            break
        x, y, _ = move(batch)
        dtype = str(x.dtype)  # what the model receives (before the float copy for statistics)
        inputs.append(x.float().cpu())
        labels.append(y.cpu())
    if not inputs:
        raise RuntimeError(f"the {name} loader yielded no batches to inspect.")
    y = torch.cat(labels)
    if x_is_images := all(b.ndim == 4 and b.shape[1:] == inputs[0].shape[1:] for b in inputs):
        x = torch.cat(inputs)
        channels = x.transpose(0, 1).reshape(x.shape[1], -1)
    else:  # features, or padded sequences whose length varies by batch: one "channel"
        x = torch.cat([b.reshape(-1) for b in inputs])
        channels = x.reshape(1, -1)
    return {
        "batch_shape": list(inputs[0].shape),
        "dtype_in_model": dtype,
        "min": float(x.min()),
        "max": float(x.max()),
        "channel_mean": [round(float(c.mean()), 4) for c in channels],
        "channel_std": [round(float(c.std()), 4) for c in channels],
        "labels_in_batch_order": y.tolist()[:32],
        "label_counts": dict(sorted(Counter(y.tolist()).items())),
        "inputs": x if x_is_images else None,
        "labels": y,
    }


def loader_settings(loader: DataLoader) -> dict[str, Any]:
    """The knobs a DataLoader actually runs with (after the template's normalisation)."""
    return {
        "batch_size": loader.batch_size,
        "sampler": type(loader.sampler).__name__,
        "num_workers": loader.num_workers,
        "pin_memory": loader.pin_memory,
        "drop_last": loader.drop_last,
        "prefetch_factor": loader.prefetch_factor,
        "persistent_workers": loader.persistent_workers,
    }


def format_report(split: str, report: dict[str, Any], classes: list[str]) -> str:
    """A few aligned lines a person reads at a glance."""
    counts = ", ".join(f"{classes[k]} {v}" for k, v in report["label_counts"].items())
    loader = ", ".join(f"{k} {v}" for k, v in report["loader"].items())
    pad = " " * (len(split) + 2)
    return (
        f"{split}: batch {tuple(report['batch_shape'])} {report['dtype_in_model']} | range "
        f"[{report['min']:.3g}, {report['max']:.3g}] | channel mean {report['channel_mean']} "
        f"std {report['channel_std']}\n{pad}labels: {counts}\n{pad}loader: {loader}"
        + (f"\n{pad}grid: {report['grid']}" if "grid" in report else "")
    )


def find_mistakes(parts: Components, reports: dict[str, dict[str, Any]]) -> list[str]:
    """The classic data-pipeline mistakes visible from the config and the first batches."""
    warnings = []
    train_loader, val_loader = parts.train_loader, parts.val_loader
    random_order = isinstance(train_loader.sampler, RANDOM_ORDERS) or train_loader.dataset.shuffle
    first = reports["train"]["labels_in_batch_order"]
    if not random_order and first == sorted(first) and len(set(first)) < len(parts.classes):
        warnings.append(
            "train batches come in label order (no shuffling): set loader.shuffle="
            "true and sampler=random, or shuffle the listing"
        )
    for split, pipeline in (("train", parts.pipelines.train), ("val", parts.pipelines.val)):
        steps = list(pipeline.transforms) if pipeline is not None else []
        if any(isinstance(t, (v2.Normalize, v2.ToDtype, v2.ConvertImageDtype)) for t in steps):
            warnings.append(
                f"transforms.{split} converts or normalises pixels, and the template "
                "normalises once per batch (transforms.mean/std): remove it from the "
                "list, or it is applied twice"
            )
    report = reports["train"]
    if report["min"] >= 0.0 and report["max"] <= 1.0 and parts.pipelines.normalizer.mean is None:
        warnings.append(
            "model inputs are raw [0, 1] pixels: set transforms.mean and "
            "transforms.std to normalise them"
        )
    if parts.pipelines.val is not None:
        probe = torch.randint(0, 256, (3, 96, 128), dtype=torch.uint8)
        outputs = []
        for seed in (0, 1):
            torch.manual_seed(seed)
            outputs.append(parts.pipelines.val(probe))
        if not torch.equal(*outputs):
            warnings.append(
                "transforms.val is random (the same image gives different inputs): "
                "keep augmentation in transforms.train only"
            )
    if val_loader.drop_last:
        warnings.append("the val loader drops its last batch: val metrics skip samples")
    targets = parts.val_set.targets
    if targets is not None:
        missing = np.flatnonzero(class_counts(targets, len(parts.classes)) == 0).tolist()
        if missing:
            names = [parts.classes[i] for i in missing]
            warnings.append(f"classes {names} have no val samples: their accuracy is unmeasured")
    return warnings


def inspect(cfg: DictConfig) -> dict[str, float]:
    """Report on the first `inspect.batches` batches of each split; save image grids."""
    out = Path(cfg.paths.output_dir)
    save_resolved_config(cfg, out)
    settings = instantiate(cfg.inspect)
    parts = assemble(cfg)
    move = mover_for(parts, channels_last=False)
    reports = {}
    for split, loader in (("train", parts.train_loader), ("val", parts.val_loader)):
        report = split_report(split, loader, move, settings.batches)
        inputs, labels = report.pop("inputs"), report.pop("labels")
        if inputs is not None and inputs.shape[1] in (1, 3):
            grid = out / f"inspect_{split}.png"
            shown = parts.pipelines.normalizer.denormalize(inputs[: settings.images])
            names = [parts.classes[label] for label in labels[: len(shown)].tolist()]
            save_image(labelled_grid(shown, names), grid)
            report["grid"], report["grid_classes"] = str(grid), names
        report["loader"] = loader_settings(loader)
        reports[split] = report
        log.info("%s", format_report(split, report, parts.classes))
    warnings = find_mistakes(parts, reports)
    for warning in warnings:
        log.warning("inspect: %s", warning)
    write_json(out / "inspect.json", {"splits": reports, "warnings": warnings})
    metrics = {"inspect/warnings": float(len(warnings))}
    write_json(out / "metrics.json", metrics)
    return metrics
