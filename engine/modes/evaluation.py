"""`mode=eval`: measure a trained checkpoint on a labelled split (val or test) and show what it
gets wrong, every output traced back to its file.

python train.py mode=eval eval.checkpoint=outputs/runs/2026-05-01/12-00-00_ab12cd eval.split=test

Writes into the run dir: metrics.json (`<split>/acc`, `<split>/loss`, `<split>/acc_per_class`
and the other metrics of the training's metrics group), per_class.csv, confusion.csv and
confusion.png, and hardest.csv (the `eval.hardest` samples with the highest loss, worst first:
where mislabelled files show up). TensorBoard gets the confusion matrix and a grid of the
hardest samples with their true and predicted classes.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

import numpy as np
from hydra._internal.utils import _locate  # what instantiate uses (targets checked before)
from hydra.utils import instantiate
from omegaconf import DictConfig
from torch import nn

from engine.core.io import write_json
from engine.data.datasets.base import DatasetHooks, MapDataset, StreamDataset
from engine.data.splits import build_split
from engine.inference.passes import run_pass
from engine.inference.plots import confusion_figure, hardest_grid
from engine.inference.reports import (
    confusion_matrix,
    hardest,
    mean_recall,
    per_class,
    write_reports,
)
from engine.inference.session import CheckpointSession, open_checkpoint
from engine.metric_keys import EVAL_SPLITS
from engine.runs.tensorboard import TensorBoardLogger
from engine.runs.tensorboard_index import link_run
from engine.training.metric import build_metrics
from engine.training.totals import PassTotals

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class EvalSettings:
    """The `eval` config group (see conf/eval/default.yaml)."""

    checkpoint: str | None
    split: str
    hardest: int

    def __post_init__(self) -> None:
        if self.split not in EVAL_SPLITS:
            raise ValueError(f"eval.split={self.split!r}: expected one of {list(EVAL_SPLITS)}.")
        if self.hardest < 0:
            raise ValueError(f"eval.hardest={self.hardest}: expected an int >= 0 (0 = none).")


def _criterion(session: CheckpointSession) -> nn.Module:
    """The training's loss group, as the training built it from its train split (of which
    the checkpoint keeps the classes and their counts: loss.class_weights=balanced)."""
    train_split = DatasetHooks()
    train_split.classes = session.classes
    counts = session.data["class_counts"]
    if counts is not None:
        train_split.targets = np.repeat(np.arange(len(counts)), counts)
    return instantiate(session.cfg.loss)(train_split).to(session.device)


def _path(dataset: MapDataset, index: int) -> str:
    """The file behind sample `index`; `#<index>` for data without files (tensors)."""
    return dataset.get_filename(index) or f"#{index}"


def evaluate_checkpoint(cfg: DictConfig) -> dict[str, float]:
    """Evaluate `eval.checkpoint` on `eval.split` of the dataset (the checkpoint's, with the
    command line's dataset.* keys); write the reports listed in the module docstring."""
    settings: EvalSettings = instantiate(cfg.eval)
    session = open_checkpoint(cfg, settings.checkpoint, "eval.checkpoint")
    split, classes = settings.split, session.classes
    kind = _locate(session.cfg.dataset._target_)  # admitted by allowed_targets already
    if isinstance(kind, type) and issubclass(kind, StreamDataset):
        raise ValueError(
            f"mode=eval traces every sample to its file and reads indexed datasets; "
            f"{kind.__name__} (dataset._target_) streams its samples: evaluate the "
            "files it was made from (e.g. dataset=imagefolder)."
        )
    dataset = build_split(
        session.cfg.dataset, split, session.pipelines.val, classes, session.data["vocab_size"]
    )
    loader = session.loader(dataset, split)
    metrics = build_metrics(session.cfg.metrics)
    totals = PassTotals(session.device, metrics)
    outputs = run_pass(
        session.model,
        loader,
        session.mover(loader),
        session.precision,
        totals,
        _criterion(session),
        f"eval {split}",
    )
    confusion = confusion_matrix(outputs, len(classes))
    rows = per_class(confusion, classes)
    results = totals.means(split, "check the split's files and dataset.on_error.")
    results.setdefault(f"{split}/acc", float(confusion.trace()) / len(outputs.labels))
    results[f"{split}/acc_per_class"] = mean_recall(rows)
    out = session.out
    worst = hardest(outputs, classes, lambda i: _path(dataset, i), settings.hardest)
    write_reports(out, confusion, rows, worst)
    figure = confusion_figure(confusion, classes, f"{split}: {results[f'{split}/acc']:.1%} correct")
    figure.savefig(out / "confusion.png", dpi=120)
    with TensorBoardLogger(out / "tensorboard") as tb:
        link_run(cfg, tb.log_dir)
        tb.figure(f"{split}/confusion", figure)
        grid = hardest_grid(worst, lambda i: dataset[i][0])
        if grid is not None:
            tb.image(f"{split}/hardest", grid)
    write_json(out / "metrics.json", results)
    log.info("eval %s: %s", split, ", ".join(f"{k} {v:.4g}" for k, v in results.items()))
    log.info("reports in %s: per_class.csv, confusion.csv/.png, hardest.csv", out)
    return results
