"""k-fold cross-validation's folds and their groups, built from the engine's classes and the
reference project's config: stratified, disjoint, complete folds of the train split (by each
sample's rarest label when multi-label); the refusals; the real val split untouched; fold.json;
the fold groups' mean ± std rows, with a failed fold said, a fold mismatch refused a mean and a
tampered or non-regular fold.json named. The template keeps +sweep=kfold as its conf/ runs it
(tests/test_kfold.py)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest
import torch
from torch import nn

from engine.data.folds import FOLD_FILE, FoldSpec, cut_folds, fold_spec, strata, write_fold_file
from engine.data.splits import build_split
from engine.sweeps.folds import MEAN_STD, MISMATCH, fold_groups
from engine.training.assemble import assemble
from engine_dev.fixtures import Labels, MapDataset
from engine_dev.small_sets import random_rows, write_listing


class MultiHot(MapDataset):
    """Multi-label targets (N, C) uint8, samples their own index."""

    multi_label = True

    def __init__(self, targets: np.ndarray) -> None:
        self.targets, self.size = targets, len(targets)
        self.classes = [f"c{i}" for i in range(targets.shape[1])]

    def __len__(self) -> int:
        return self.size

    def __getitem__(self, i: int) -> int:
        return i


def _all_folds(dataset: MapDataset, folds: int, seed: int) -> list[tuple]:
    return [cut_folds(dataset, dataset, FoldSpec(folds, k, seed)) for k in range(folds)]


def _assert_partition(cuts: list[tuple], size: int) -> None:
    vals = [np.asarray(val.record.val_indices) for _, val in cuts]
    assert sorted(np.concatenate(vals).tolist()) == list(range(size))  # disjoint, complete
    for (train, val), indices in zip(cuts, vals, strict=True):
        assert set(train.indices) == set(range(size)) - set(indices)  # the other K-1 folds
        assert list(indices) == sorted(indices) and len(val) == val.record.fold_size
    assert len({tuple(val.record.fingerprints) for _, val in cuts}) == 1  # one deal


def _assert_within_one(labels: np.ndarray, cuts: list[tuple]) -> None:
    for label in np.unique(labels):
        counts = [int((labels[val.indices] == label).sum()) for _, val in cuts]
        assert max(counts) - min(counts) <= 1, (label, counts)


@pytest.mark.parametrize("folds", [2, 3, 5])
@pytest.mark.parametrize("seed", [0, 7])
def test_single_label_folds_are_disjoint_complete_and_stratified(folds: int, seed: int) -> None:
    labels = np.repeat([0, 1, 2, 3], [23, 11, 7, 2])
    dataset = Labels(np.random.default_rng(seed).permutation(labels).tolist(), 4)
    cuts = _all_folds(dataset, folds, seed)
    _assert_partition(cuts, len(labels))
    _assert_within_one(dataset.targets, cuts)
    _, val = cuts[1]
    assert (val.targets == dataset.targets[val.indices]).all()  # targets restricted to the view
    assert val.classes == dataset.classes and val[0] == dataset[int(val.indices[0])]


@pytest.mark.parametrize("folds", [2, 4])
@pytest.mark.parametrize("seed", [0, 3])
def test_multi_label_folds_are_stratified_by_each_samples_rarest_label(
    folds: int, seed: int
) -> None:
    rng = np.random.default_rng(seed)
    targets = (rng.random((60, 4)) < [0.6, 0.3, 0.1, 0.5]).astype(np.uint8)
    targets[:5] = 0  # label-less samples: a stratum of their own
    dataset = MultiHot(targets)
    cuts = _all_folds(dataset, folds, seed)
    _assert_partition(cuts, 60)
    stratum, by = strata(targets)
    assert by == "rarest label"
    _assert_within_one(stratum, cuts)
    assert cuts[0][1].targets.shape == (len(cuts[0][1]), 4)


def test_rarest_label_is_the_samples_own_label_with_fewest_samples() -> None:
    targets = np.array([[1, 1, 0], [1, 0, 0], [1, 1, 1], [0, 0, 0]], dtype=np.uint8)
    assert strata(targets)[0].tolist() == [1, 0, 2, -1]  # counts: 3, 2, 1


def test_a_dataset_without_targets_is_cut_unstratified(caplog) -> None:
    dataset = MultiHot(np.zeros((10, 1), dtype=np.uint8))
    dataset.targets = None
    cuts = _all_folds(dataset, 3, 0)
    _assert_partition(cuts, 10)
    assert (
        sorted(len(v) for _, v in cuts) == [3, 3, 4] and cuts[0][1].record.stratified_by == "none"
    )
    assert "unstratified" in caplog.text


@pytest.mark.parametrize(
    ("node", "message"),
    [
        ({"folds": 1, "fold": 0, "fold_seed": 0}, r"dataset\.folds=1: expected at least 2"),
        ({"folds": 3, "fold": 3, "fold_seed": 0}, r"dataset\.fold=3: expected a fold in 0\.\.2"),
        (
            {"folds": None, "fold": 2, "fold_seed": 0},
            r"dataset\.fold=2 is set without dataset\.folds",
        ),
        (
            {"_target_": "engine.data.datasets.tar_shards.TarShardDataset", "folds": 3, "fold": 0},
            r"dataset\.folds=3: .* is a stream",
        ),
        (
            {"_target_": "engine.data.datasets.mix.MixDataset", "folds": 3, "fold": 0},
            r"dataset=mix",
        ),
    ],
)
def test_bad_fold_settings_are_refused_naming_the_key(node: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        fold_spec({"fold_seed": 0, **node})


def test_more_folds_than_train_samples_is_refused() -> None:
    with pytest.raises(ValueError, match=r"dataset\.folds=6: the train split has only 5 samples"):
        cut_folds(Labels([0, 1, 0, 1, 0], 2), Labels([0, 1, 0, 1, 0], 2), FoldSpec(6, 0, 0))


def test_a_fold_validates_on_train_files_and_the_real_val_split_is_untouched(
    reference_cfg, tmp_path: Path
) -> None:
    fold = ("dataset.folds=3", "dataset.fold=1", "dataset.fold_seed=4")
    cfg = reference_cfg("run", "dataset=csv", *fold)
    parts = assemble(cfg)
    assert (len(parts.train_set), len(parts.val_set)) == (32, 16)  # of the 48 train samples
    names = [parts.val_set.get_filename(i) for i in range(len(parts.val_set))]
    assert all("/train/" in name for name in names)
    record = json.loads((tmp_path / "run" / FOLD_FILE).read_text())
    assert (record["folds"], record["fold"], record["fold_seed"]) == (3, 1, 4)
    assert record["train_split_size"] == 48 and len(record["val_indices"]) == 16
    assert record["fingerprint"] == record["fingerprints"][1] and len(record["fingerprints"]) == 3
    val = build_split(
        cfg.dataset, "val", None, parts.classes
    )  # what mode=eval eval.split=val reads
    assert len(val) == 30 and all("/val/" in val.get_filename(i) for i in range(len(val)))


class MultiHotBCE(nn.BCEWithLogitsLoss):
    """A multi-label loss for the reference project (whose own loss is single-label)."""

    multi_label = True

    def __init__(self, dataset: object) -> None:
        del dataset
        super().__init__()


def multi_label_cfg(reference_cfg, tmp_path: Path, *overrides: str):
    """The reference project on a multi-label listing of 48 rows (33 train) with a multi-label
    loss, its run dir tmp_path/run."""
    listing = write_listing(tmp_path / "data", random_rows(48))
    return reference_cfg(
        "run",
        "dataset=csv",
        f"dataset.csv={listing}",
        "dataset.train_csv=null",
        "dataset.val_csv=null",
        "dataset.multi_label=true",
        "dataset.label_column=labels",
        f"loss._target_={__name__}.MultiHotBCE",
        *overrides,
    )


def test_a_multi_label_csv_is_cut_by_rarest_label(reference_cfg, tmp_path: Path) -> None:
    parts = assemble(multi_label_cfg(reference_cfg, tmp_path, "dataset.folds=3", "dataset.fold=2"))
    assert (len(parts.train_set), len(parts.val_set)) == (22, 11)  # the listing's 33 train rows
    assert parts.val_set.targets.shape == (11, 3) and parts.val_set.multi_label
    label = parts.val_set[0][1]
    assert label.dtype == torch.float32 and label.shape == (3,)
    record = json.loads((tmp_path / "run" / FOLD_FILE).read_text())
    assert record["stratified_by"] == "rarest label" and record["train_split_size"] == 33


def _fold_jobs(tmp_path: Path, seeds: list[int]) -> list[dict[str, str]]:
    """Summary rows of 3 fold jobs, job k dealt with seeds[k], each with its fold.json."""
    dataset = Labels(list(range(5)) * 6, 5)
    rows = []
    for k, seed in enumerate(seeds):
        _, val = cut_folds(dataset, dataset, FoldSpec(3, k, seed))
        write_fold_file(val.record, tmp_path / str(k))
        overrides = f"dataset.fold={k} model=mlp"
        row = {"job": str(k), "status": "ok", "overrides": overrides, "dir": str(tmp_path / str(k))}
        rows.append(row | {"val/acc": str(0.5 + k / 10), "error": ""})
    return rows


def test_a_fold_dealt_with_another_seed_is_a_mismatch_without_a_mean(tmp_path: Path) -> None:
    (group,), lines = fold_groups(_fold_jobs(tmp_path, [0, 0, 1]), ["val/acc"], 3)
    assert group["status"] == MISMATCH and not group.get("val/acc")
    (line,) = lines
    assert line.startswith("FOLD MISMATCH in `model=mlp`: job 2's folds (fold_seed 1")
    (same,), said = fold_groups(_fold_jobs(tmp_path, [0, 0, 0]), ["val/acc"], 3)
    assert same["status"] == MEAN_STD and not said
    assert float(same["val/acc"]) == pytest.approx(0.6)
    assert float(same["val/acc_std"]) == pytest.approx(0.1)


def test_a_failed_fold_rerun_into_the_sweep_dir_replaces_its_row(tmp_path: Path) -> None:
    rows = _fold_jobs(tmp_path, [0, 0, 0])
    failed = rows[2] | {"status": "failed", "val/acc": "", "error": "OSError: gone"}
    # the first sweep: job 2 failed; rerun with summary.skip_completed: job 2 again, ok
    (group,), lines = fold_groups([*rows[:2], failed, rows[2]], ["val/acc"], 3)
    assert (group["status"], group["folds"]) == (MEAN_STD, "3 of 3") and not lines
    assert float(group["val/acc"]) == pytest.approx(0.6)
    # two sweeps into one dir: folds 0 and 1, then fold 2 alone, numbered job 0 again
    again = rows[2] | {"job": "0"}
    (group,), lines = fold_groups([*rows[:2], again], ["val/acc"], 3)
    assert (group["status"], group["folds"]) == (MEAN_STD, "3 of 3") and not lines
    # a fold outside 0..K-1 failed, the sweep rerun with the right folds: no failure left
    wrong = failed | {"overrides": "dataset.fold=5 model=mlp"}
    (group,), lines = fold_groups([*rows[:2], wrong, rows[2]], ["val/acc"], 3)
    assert group["folds"] == "3 of 3" and not lines
    # a fold no job ran is said too
    (group,), lines = fold_groups(rows[:2], ["val/acc"], 3)
    assert group["folds"] == "2 of 3" and "no job ran fold 2 (dataset.fold)" in lines[0]
    (none,), lines = fold_groups([failed], ["val/acc"], 3)
    assert none["status"] == "no fold finished" and "0 of 3 folds finished" in lines[0]


# a job's fold.json edited by hand: how, and the field the one line names
TAMPERED = {
    "not JSON": (lambda r: "{oops", "is not JSON"),
    "a list": (lambda r: [1, 2], "it is [1, 2], not an object of folds"),
    "a missing key": (lambda r: {k: v for k, v in r.items() if k != "fingerprints"}, "lacks"),
    "a fold out of range": (lambda r: r | {"fold": 7}, "its fold is 7, outside 0..2"),
    "indices not a list": (
        lambda r: r | {"val_indices": "0,1"},
        "its val_indices is '0,1', not a list of ints",
    ),
    "indices out of range": (lambda r: r | {"val_indices": [0, 99]}, "val_indices are not"),
    "folds a string": (lambda r: r | {"folds": "3"}, "its folds is '3', not an int"),
    "fingerprints too short": (lambda r: r | {"fingerprints": []}, "fingerprints is not a list"),
    "nested deeply": (lambda r: "[" * 200_000 + "]" * 200_000, "is not JSON (nested too deeply)"),
}


@pytest.mark.parametrize("case", list(TAMPERED))
def test_a_tampered_fold_json_makes_its_group_a_mismatch_naming_the_file(tmp_path, case) -> None:
    """The summary callback reads every job's fold.json back: a hand-edited one is named
    (file, field, fix) in the group's mismatch, never a crash leaving stale summary files."""
    rows = _fold_jobs(tmp_path, [0, 0, 0])
    path = tmp_path / "1" / FOLD_FILE
    tamper, says = TAMPERED[case]
    edited = tamper(json.loads(path.read_text()))
    path.write_text(edited if isinstance(edited, str) else json.dumps(edited))
    (group,), lines = fold_groups(rows, ["val/acc"], 3)
    assert group["status"] == MISMATCH and not group.get("val/acc")
    (line,) = lines
    assert f"job 1: {path}: " in line and says in line and "rerun that job" in line
    assert "\n" not in line


@pytest.mark.timeout(20)  # each once blocked the summary forever
@pytest.mark.parametrize(
    "kind, says", [("a FIFO", "a FIFO (named pipe)"), ("a link to /dev/zero", "a character device")]
)
def test_a_fold_json_that_is_no_regular_file_is_a_mismatch_not_a_hang(tmp_path, kind, says) -> None:
    rows = _fold_jobs(tmp_path, [0, 0, 0])
    path = tmp_path / "1" / FOLD_FILE
    path.unlink()
    if kind == "a FIFO":
        os.mkfifo(path)
    else:
        path.symlink_to("/dev/zero")
    (group,), (line,) = fold_groups(rows, ["val/acc"], 3)
    assert group["status"] == MISMATCH and f"job 1: {path}: it is {says}, not a fold.json" in line
