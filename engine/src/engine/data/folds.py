"""K-fold cross-validation of the train split (`dataset.folds`, `dataset.fold`,
`dataset.fold_seed`): the train split is dealt into K stratified folds; fold `fold` becomes
the val set (the train split's samples through the val pipeline) and the other K-1 train.
The real val split is not read, so `mode=eval eval.split=val` still measures it.

Stratified so that every fold holds each stratum within one sample: per stratum (the label,
so single-label folds hold each class within one sample; multi-label: each sample's rarest
own label, label-less samples together, so a sample's other labels follow it and their
counts per fold only come close), a seeded shuffle
then a round-robin deal, each stratum starting where the last one stopped (so fold sizes also
differ by one at most). The same (targets, K, fold_seed) deal the same folds in every job of a
sweep; each job writes its fold and the fingerprints of all K into fold.json to prove it.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from itertools import pairwise
from pathlib import Path
from typing import Annotated, Any

import numpy as np
from hydra._internal.utils import _locate
from omegaconf import DictConfig, open_dict
from torch.utils.data import Dataset, IterableDataset

from engine.core.bounds import Bound, Count
from engine.core.dataset_keys import FOLD_KEYS
from engine.core.io import write_json
from engine.core.records import RecordError, read_record
from engine.data.targets import is_multi_hot, rarest_labels
from engine.data.wrapper import SubsetView

log = logging.getLogger(__name__)

FOLD_FILE = "fold.json"  # in the run dir: this job's fold (FoldRecord)
MAX_FOLD_BYTES = 2**30  # a fold.json of ~80 million val indices; past it, no fold.json
MIX = "engine.data.datasets.mix.MixDataset"


@dataclass(frozen=True)
class FoldSpec:
    """Which fold of how many, dealt from which seed."""

    folds: int
    fold: int
    seed: int


@dataclass(frozen=True)
class FoldRecord:
    """What fold.json holds: enough to check, across a sweep's jobs, that the folds are the
    same deal, disjoint and together the whole train split."""

    folds: Count
    fold: Count
    fold_seed: Annotated[int, Bound(0)]  # dataset.fold_seed: any int numpy seeds from
    train_split_size: Count  # samples of the whole train split (N)
    fold_size: Count  # samples of this fold (the val set)
    stratified_by: str  # label | rarest label | none (a dataset without targets)
    val_indices: list[Count]  # sorted, into the train split
    fingerprint: str  # of val_indices
    fingerprints: list[str]  # of every fold 0..K-1, as this job dealt them


def _int(cfg: Any, key: str) -> int:
    value = cfg.get(key, 0)  # fold and fold_seed: 0 where a node lacks them (a mix's source)
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"dataset.{key}={value!r}: expected an int, e.g. dataset.{key}=0.")
    return value


def fold_spec(cfg: DictConfig | Mapping[str, Any]) -> FoldSpec | None:
    """The fold a dataset node asks for (None: `dataset.folds` is null), or one line naming
    the key at fault and the fix."""
    folds = cfg.get("folds")
    if folds is None:
        if cfg.get("fold") not in (None, 0):
            raise ValueError(
                f"dataset.fold={cfg.get('fold')} is set without dataset.folds: set the number "
                "of folds too (e.g. dataset.folds=5), or drop dataset.fold."
            )
        return None
    folds, fold, seed = _int(cfg, "folds"), _int(cfg, "fold"), _int(cfg, "fold_seed")
    if folds < 2:
        raise ValueError(
            f"dataset.folds={folds}: expected at least 2 folds (e.g. dataset.folds=5), or null "
            "to train on the whole train split."
        )
    if not 0 <= fold < folds:
        raise ValueError(
            f"dataset.fold={fold}: expected a fold in 0..{folds - 1} (dataset.folds={folds}), "
            f"e.g. dataset.fold=0."
        )
    target = cfg.get("_target_")
    kind = _locate(target) if isinstance(target, str) else None
    if isinstance(kind, type) and issubclass(kind, IterableDataset):
        raise ValueError(
            f"dataset.folds={folds}: dataset._target_={target} is a stream, whose samples "
            "cannot be picked by index; cut folds of a map-style dataset (imagefolder, csv, "
            "tensor, cache, ...), or set dataset.folds=null."
        )
    if target == MIX:
        raise ValueError(
            f"dataset.folds={folds}: dataset=mix draws each epoch from its sources' index "
            "ranges, which folds would cut; cross-validate one source on its own "
            "(dataset=<its kind>), or set dataset.folds=null."
        )
    return FoldSpec(folds, fold, seed)


def without_fold_keys(cfg: Any) -> Any:
    """The dataset node without the fold keys, which are no argument of the dataset kind."""
    if not isinstance(cfg, DictConfig):
        return {k: v for k, v in cfg.items() if k not in FOLD_KEYS}
    node = cfg.copy()  # keeps its parent: interpolations (${paths.demo_dir}) still resolve
    with open_dict(node):
        for key in FOLD_KEYS:
            node.pop(key, None)
    return node


def strata(targets: np.ndarray) -> tuple[np.ndarray, str]:
    """Each sample's stratum (engine.data.targets.rarest_labels: its label, or its rarest
    own label; -1 without labels) and what it is."""
    return rarest_labels(targets), "rarest label" if is_multi_hot(targets) else "label"


def deal(stratum: np.ndarray, folds: int, seed: int) -> np.ndarray:
    """Each sample's fold: every stratum shuffled by `seed` and dealt round-robin, the next
    stratum starting at the fold after the last one dealt."""
    rng = np.random.default_rng(seed)
    fold = np.empty(len(stratum), dtype=np.int64)
    start = 0
    for label in np.unique(stratum):
        members = rng.permutation(np.flatnonzero(stratum == label))
        fold[members] = (start + np.arange(len(members))) % folds
        start += len(members)
    return fold


def fingerprint(indices: np.ndarray) -> str:
    """A short sha256 of sorted train-split indices."""
    return hashlib.sha256(np.sort(indices).astype("<i8").tobytes()).hexdigest()[:16]


def cut_folds(
    train: Dataset, train_as_val: Dataset, spec: FoldSpec
) -> tuple[SubsetView, SubsetView]:
    """(the other K-1 folds of `train`, fold `spec.fold` of `train_as_val`): the same samples
    of the train split, the second built with the val pipeline."""
    size = len(train)  # type: ignore[arg-type]
    if spec.folds > size:
        raise ValueError(
            f"dataset.folds={spec.folds}: the train split has only {size} samples, fewer than "
            f"the folds; use dataset.folds={max(2, size)} or fewer."
        )
    targets = train.targets  # type: ignore[attr-defined]
    if targets is None:
        stratum, by = np.zeros(size, dtype=np.int64), "none"
        log.warning("dataset has no targets: folds are cut unstratified (seeded shuffle only)")
    else:
        stratum, by = strata(targets)
    dealt = deal(stratum, spec.folds, spec.seed)
    val_indices = np.flatnonzero(dealt == spec.fold)
    prints = [fingerprint(np.flatnonzero(dealt == k)) for k in range(spec.folds)]
    record = FoldRecord(
        spec.folds,
        spec.fold,
        spec.seed,
        size,
        len(val_indices),
        by,
        val_indices.tolist(),
        prints[spec.fold],
        prints,
    )
    log.info(
        "fold %d of %d (seed %d): %d val / %d train samples from the train split",
        spec.fold,
        spec.folds,
        spec.seed,
        len(val_indices),
        size - len(val_indices),
    )
    rest = np.flatnonzero(dealt != spec.fold)
    train_folds = SubsetView(train, rest, record=record)
    return train_folds, SubsetView(train_as_val, val_indices, record=record)


def write_fold_file(record: FoldRecord, folder: Path) -> Path:
    """`folder`/fold.json: the job's fold (FoldRecord)."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / FOLD_FILE
    write_json(path, asdict(record))
    return path


def _deal_problem(record: dict[str, Any]) -> str | None:
    """What in a fold.json of the right fields and types contradicts itself, or None."""
    folds, fold, size = record["folds"], record["fold"], record["train_split_size"]
    if not 2 <= folds <= size:
        return f"its folds is {folds}, not in 2..train_split_size ({size})"
    if not fold < folds:
        return f"its fold is {fold}, outside 0..{folds - 1}"
    indices = record["val_indices"]
    if any(i >= size for i in indices) or any(a >= b for a, b in pairwise(indices)):
        return f"its val_indices are not ascending indices in 0..{size - 1}"
    if record["fold_size"] != len(indices):
        return f"its fold_size is {record['fold_size']}, its val_indices hold {len(indices)}"
    if len(record["fingerprints"]) != folds:
        return f"its fingerprints is not a list of {folds} (one per fold)"
    return None


def read_fold_file(path: Path) -> FoldRecord:
    """A job's fold.json, read as hostile input (a hand edit, a copy from elsewhere): one
    ValueError line naming the file, the field and the fix unless every FoldRecord field is
    there with its type and range, and the deal agrees with itself."""
    fix = "this file is the job's own record of its fold; rerun that job (dataset.fold) to write it again."
    record = read_record(path, FoldRecord, MAX_FOLD_BYTES, "a fold.json", fix)
    problem = _deal_problem(record)
    if problem is not None:
        raise RecordError(f"{path}: {problem}: {fix}")
    return FoldRecord(**record)
