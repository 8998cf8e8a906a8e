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
from src.models.build import build_model
from src.training.checkpoint import save_checkpoint
from src.training.device import resolve_device, resolve_precision
from src.training.loop import BatchMover, Fitter, optimizer_steps_per_epoch
from src.training.tensorboard import TensorBoardLogger, hparams_of
from src.utils.io import write_json
from src.utils.resolvers import register_resolvers
from src.utils.seeding import seed_everything

log = logging.getLogger("train")


def train(cfg: DictConfig) -> dict[str, Any]:
    """Train and evaluate as `cfg` says; returns the final metrics (also in metrics.json)."""
    start = time.perf_counter()
    out = Path(cfg.paths.output_dir)
    settings = instantiate(cfg.trainer)
    seed_everything(settings.seed)
    device = resolve_device(settings.device)
    precision = resolve_precision(settings.precision, device)

    pipelines = instantiate(cfg.transforms)
    train_set = instantiate(cfg.dataset, split="train", transform=pipelines.train)
    val_set = instantiate(
        cfg.dataset, split="val", transform=pipelines.val, classes=train_set.classes
    )
    input_shape = tuple(next(iter(val_set))[0].shape)
    model = build_model(cfg.model, num_classes=len(train_set.classes), input_shape=input_shape)
    memory_format = torch.channels_last if settings.channels_last else torch.preserve_format
    model = model.to(device, memory_format=memory_format)
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
        len(train_set.classes),
        input_shape,
    )

    tb = TensorBoardLogger(out / "tensorboard")
    resolved = OmegaConf.to_container(cfg, resolve=True)
    tb.text("config", OmegaConf.to_yaml(resolved))
    (out / "config_resolved.yaml").write_text(OmegaConf.to_yaml(resolved))
    fitter = Fitter(
        model,
        optimizer,
        scheduler,
        BatchMover(device, pipelines.normalizer, settings.channels_last),
        precision,
        settings,
        tb,
        pipelines.normalizer.denormalize,
    )

    def checkpoint(epoch: int, metrics: dict[str, float]) -> None:
        save_checkpoint(
            out / "checkpoints" / "last.pt",
            {
                "model": model.state_dict(),
                "optimizer": optimizer.state_dict(),
                "scheduler": scheduler.state_dict(),
                "scaler": precision.scaler.state_dict() if precision.scaler else None,
                "epoch": epoch,
                "step": fitter.step,
                "metrics": metrics,
                "classes": train_set.classes,
                "config": resolved,
            },
        )

    history = fitter.fit(train_loader, val_loader, checkpoint)
    last = history[-1]
    total_samples = sum(h["train/samples"] for h in history)
    train_s = sum(h["train/epoch_s"] for h in history)
    metrics = {
        "val/acc": last["val/acc"],
        "val/loss": last["val/loss"],
        "val/best_acc": max(h["val/acc"] for h in history),
        "train/loss": last["train/loss"],
        "train/samples_per_s": total_samples / train_s,
        "train/data_wait_frac": sum(h["train/data_wait_frac"] * h["train/epoch_s"] for h in history)
        / train_s,
        "train/first_batch_s": history[0]["train/first_batch_s"],
        "epochs": len(history),
        "wall_s": time.perf_counter() - start,
    }
    tb.hparams(hparams_of(resolved), metrics)
    tb.close()
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
