"""`mode=eval`: measure a trained checkpoint on a labelled split (val or test) and show what it
gets wrong, every output traced back to its file.

python train.py mode=eval eval.checkpoint=outputs/runs/2026-05-01/12-00-00_ab12cd eval.split=test

Writes into the run dir: metrics.json (`<split>/acc`, `<split>/loss`, `<split>/acc_per_class`
and the other metrics of the training's metrics group), per_class.csv, confusion.csv and
confusion.png, and hardest.csv (the `eval.hardest` samples with the highest loss, worst first:
where mislabelled files show up). TensorBoard gets the confusion matrix and a grid of the
hardest samples with their true and predicted classes.

A multi-label checkpoint (its dataset.multi_label: true) gets metrics.json's `<split>/map`,
`<split>/f1`, `<split>/subset_acc` and `<split>/loss` (and its metrics group's others),
per_class.csv (class, AP, F1, precision, recall, support) and hardest.csv (per-sample binary
cross-entropy meaned over the classes), labels at `eval.threshold` (null: the checkpoint's
metrics.threshold); no confusion matrix, which needs one true class per sample.
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
from engine.inference import multilabel_reports
from engine.inference.labeller import Labeller
from engine.inference.passes import Outputs, run_pass
from engine.inference.plots import confusion_figure, hardest_grid, labels_caption
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

# The most train samples x classes rebuilt (1 byte each) for loss.pos_weight=balanced; past it
# the loss says to list the weights (loss.pos_weight=[...] on the command line)
MAX_CELLS = 50_000_000


@dataclass(frozen=True)
class EvalSettings:
    """The `eval` config group (see engine/conf/eval/default.yaml)."""

    checkpoint: str | None
    split: str
    hardest: int
    threshold: float | None = None

    def __post_init__(self) -> None:
        if self.split not in EVAL_SPLITS:
            raise ValueError(f"eval.split={self.split!r}: expected one of {list(EVAL_SPLITS)}.")
        if self.hardest < 0:
            raise ValueError(f"eval.hardest={self.hardest}: expected an int >= 0 (0 = none).")


def _criterion(session: CheckpointSession, multi_label: bool) -> nn.Module:
    """The training's loss group, as the training built it from its train split (of which
    the checkpoint keeps the classes and their counts: loss.class_weights=balanced; for
    multi-label data also its size: loss.pos_weight=balanced, negatives over positives)."""
    train_split = DatasetHooks()
    train_split.classes = session.classes
    train_split.multi_label = multi_label
    counts, samples = session.data["class_counts"], session.data.get("train_samples")
    if counts is not None and not multi_label:
        train_split.targets = np.repeat(np.arange(len(counts)), counts)
    elif counts is not None and isinstance(samples, int) and samples * len(counts) <= MAX_CELLS:
        # multi-hot rows with the same size and counts
        train_split.targets = (np.arange(samples)[:, None] < np.asarray(counts)).astype(np.uint8)
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
    labeller = Labeller.from_config(session.cfg, settings.threshold, "eval.threshold")
    kind = _locate(session.cfg.dataset._target_)  # admitted by allowed_targets already
    if isinstance(kind, type) and issubclass(kind, StreamDataset):
        raise ValueError(
            f"mode=eval traces every sample to its file and reads indexed datasets; "
            f"{kind.__name__} (dataset._target_) streams its samples: evaluate the "
            "files it was made from (e.g. dataset=imagefolder)."
        )
    labeller.check_names(session.file)
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
        _criterion(session, labeller.multi_label),
        f"eval {split}",
    )
    results = totals.means(split, "check the split's files and dataset.decode.on_error.")
    report = _multi_label_reports if labeller.multi_label else _single_label_reports
    written = report(cfg, session, outputs, dataset, settings, labeller, results)
    write_json(session.out / "metrics.json", results)
    log.info("eval %s: %s", split, ", ".join(f"{k} {v:.4g}" for k, v in results.items()))
    log.info("reports in %s: %s", session.out, written)
    return results


def _single_label_reports(
    cfg: DictConfig,
    session: CheckpointSession,
    outputs: Outputs,
    dataset: MapDataset,
    settings: EvalSettings,
    labeller: Labeller,
    results: dict[str, float],
) -> str:
    """Adds acc and acc_per_class to `results`; writes per_class.csv, confusion.csv/.png,
    hardest.csv and their board. Returns what it wrote, for the log."""
    split, classes = settings.split, labeller.classes
    confusion = confusion_matrix(outputs, len(classes))
    rows = per_class(confusion, classes)
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
    return "per_class.csv, confusion.csv/.png, hardest.csv"


def _multi_label_reports(
    cfg: DictConfig,
    session: CheckpointSession,
    outputs: Outputs,
    dataset: MapDataset,
    settings: EvalSettings,
    labeller: Labeller,
    results: dict[str, float],
) -> str:
    """Sets map, f1 and subset_acc in `results`, over the whole split at the threshold
    (replacing the metrics group's, which may have been measured at another); writes
    per_class.csv, hardest.csv and their board. Returns what it wrote, for the log."""
    split, out = settings.split, session.out
    results |= multilabel_reports.summary(outputs, labeller, split)
    rows = multilabel_reports.per_class(outputs, labeller)
    worst = multilabel_reports.hardest(
        outputs, labeller, lambda i: _path(dataset, i), settings.hardest
    )
    multilabel_reports.write_reports(out, rows, worst)
    with TensorBoardLogger(out / "tensorboard") as tb:
        link_run(cfg, tb.log_dir)
        grid = hardest_grid(worst, lambda i: dataset[i][0], labels_caption)
        if grid is not None:
            tb.image(f"{split}/hardest", grid)
    return (
        f"per_class.csv, hardest.csv (multi-label, labels at threshold {labeller.threshold:g}; "
        "no confusion.csv/.png: a confusion matrix needs one true class per sample)"
    )
