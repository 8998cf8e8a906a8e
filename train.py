"""Train a classifier: compose the config, instantiate every part, run the loop.

python train.py dataset=csv loader.num_workers=4
python train.py -m loader.num_workers=0,2 loader.batch_size=32,64
"""

from __future__ import annotations

import logging
import os
import time
from pathlib import Path
from typing import Any

import hydra
import torch
from hydra.utils import instantiate
from omegaconf import DictConfig, OmegaConf

from src.data.loaders import build_loaders
from src.data.splits import build_splits, input_shape
from src.models.build import build_model
from src.training.batches import BatchMover
from src.training.checkpoint import save_checkpoint
from src.training.device import resolve_device, resolve_precision
from src.training.loop import Fitter, optimizer_steps_per_epoch
from src.training.summary import summarize
from src.training.tensorboard import TensorBoardLogger, hparams_of
from src.utils.io import write_json
from src.utils.resolvers import register_resolvers
from src.utils.seeding import seed_everything

log = logging.getLogger("train")


def train(cfg: DictConfig) -> dict[str, Any]:
    """Train and evaluate as `cfg` says; returns the final metrics (also in metrics.json)."""
    start = time.perf_counter()
    out = Path(cfg.paths.output_dir)
    out.mkdir(parents=True, exist_ok=True)
    settings = instantiate(cfg.trainer)
    seed_everything(settings.seed)
    device = resolve_device(settings.device)
    precision = resolve_precision(settings.precision, device)

    pipelines = instantiate(cfg.transforms)
    train_set, val_set = build_splits(cfg.dataset, pipelines)
    shape, classes = input_shape(val_set), train_set.classes
    model = build_model(cfg.model, num_classes=len(classes), input_shape=shape)
    layout = torch.channels_last if settings.channels_last else torch.preserve_format
    model = model.to(device, memory_format=layout)
    train_loader, val_loader = build_loaders(
        train_set,
        val_set,
        instantiate(cfg.loader),
        instantiate(cfg.sampler),
        pin_memory_ok=device.type == "cuda",
    )
    optimizer = instantiate(cfg.optimizer)(model.parameters())
    total_steps = settings.max_epochs * optimizer_steps_per_epoch(train_loader, settings)
    scheduler = instantiate(cfg.scheduler)(optimizer, total_steps=total_steps)
    log.info(
        "device %s | precision %s | %d train / %d val samples | %d classes | input %s",
        device,
        settings.precision,
        len(train_set),
        len(val_set),
        len(classes),
        shape,
    )

    resolved = OmegaConf.to_container(cfg, resolve=True)
    (out / "config_resolved.yaml").write_text(OmegaConf.to_yaml(resolved))
    with TensorBoardLogger(out / "tensorboard") as tb:
        tb.text("config", OmegaConf.to_yaml(resolved))
        move = BatchMover(device, pipelines.normalizer, settings.channels_last)
        fitter = Fitter(
            model,
            optimizer,
            scheduler,
            move,
            precision,
            settings,
            tb,
            pipelines.normalizer.denormalize,
        )
        history = fitter.fit(
            train_loader,
            val_loader,
            on_epoch_end=lambda epoch, metrics: save_checkpoint(
                out / "checkpoints" / "last.pt",
                fitter.state(epoch) | {"metrics": metrics, "classes": classes, "config": resolved},
            ),
        )
        metrics = summarize(history, wall_s=time.perf_counter() - start)
        tb.hparams(hparams_of(resolved), metrics)
    write_json(out / "metrics.json", metrics)
    log.info("metrics: %s", ", ".join(f"{k} {v:.4g}" for k, v in metrics.items()))
    return metrics


@hydra.main(version_base="1.3", config_path="conf", config_name="config")
def main(cfg: DictConfig) -> float:
    """Hydra entry point; returns val/acc for sweepers that optimise it."""
    return train(cfg)["val/acc"]


if __name__ == "__main__":  # required for spawn-started loader workers (Windows, macOS)
    os.environ.setdefault("PROJECT_ROOT", str(Path(__file__).resolve().parent))
    register_resolvers()
    main()
