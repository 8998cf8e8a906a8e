"""The splits of the template's own dataset options: dataset=tensor's test split, a kind with
none refused by name, and dataset=csv given one listing on its own (its demo listings then
default to null). What every dataset kind's splits guarantee (test splits asked for by mode=eval
only, a CSV listing on its own, the class-spread sample of a limited validation, val_fraction's
split.csv) is proved in the engine suite: engine/tests/test_splits.py and
engine/tests/test_imagefolder_holdout.py."""

from __future__ import annotations

import pytest
from hydra.errors import InstantiationException
from hydra.utils import instantiate

from engine.data.splits import build_split
from engine_dev.api import without_fold_keys

CLASSES = ["circle", "cross", "square", "star", "triangle"]


def test_csv_listing_on_its_own_needs_no_other_key(make_cfg, demo_dir) -> None:
    one = make_cfg("dataset=csv", f"dataset.csv={demo_dir / 'samples.csv'}")
    assert one.dataset.train_csv is None and one.dataset.val_csv is None
    assert len(instantiate(without_fold_keys(one.dataset), split="train")) == 48


def test_tensor_test_path(make_cfg, demo_dir) -> None:
    val = demo_dir / "tensors" / "val.pt"
    test = build_split(
        make_cfg("dataset=tensor", f"dataset.test_path={val}").dataset, "test", None, CLASSES
    )
    assert len(test) == 30
    with pytest.raises(InstantiationException, match=r"dataset\.test_path is null"):
        build_split(make_cfg("dataset=tensor").dataset, "test", None, CLASSES)


def test_a_kind_without_a_test_split_is_refused_by_name(make_cfg) -> None:
    cfg = make_cfg("dataset=sequences")
    with pytest.raises(ValueError, match=r"eval\.split=test: dataset\._target_=.*JsonlSequences"):
        build_split(cfg.dataset, "test", None, ["a", "b", "c"])
