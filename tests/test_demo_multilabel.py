"""experiment=multilabel_csv reads the multi-label demo (data/demo/multilabel, `make data`) as
multi-hot targets. The demo's own files (shapes, colours, seeds, its regeneration) are the
engine's suite's (engine/tests/test_demo_multilabel.py)."""

from __future__ import annotations

import numpy as np
import torch
from hydra.utils import instantiate

from engine.metric_keys import metric_names
from engine_dev.api import without_fold_keys
from engine_dev.demo_multilabel import LABELS


def test_experiment_reads_the_demo_as_multi_hot_targets(make_cfg) -> None:
    cfg = make_cfg("experiment=multilabel_csv")
    # best.pt follows the metrics group (val/map), not a monitor the experiment sets
    assert cfg.trainer.checkpoint.monitor is None and cfg.trainer.checkpoint.mode is None
    assert metric_names(cfg.metrics)[0] == "map"
    assert {"map", "f1", "subset_acc"} <= set(cfg.metrics)
    train = instantiate(without_fold_keys(cfg.dataset), split="train", transform=None)
    assert train.multi_label and list(train.classes) == list(LABELS)
    assert train.targets.shape == (40, len(LABELS))
    _, label = train[0]
    assert label.dtype == torch.float32 and label.shape == (len(LABELS),)
    assert set(np.unique(train.targets)) <= {0, 1} and not train.targets.sum(axis=1).all()
