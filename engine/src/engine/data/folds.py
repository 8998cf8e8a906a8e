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
import json
import logging
import os
import stat
from collections.abc import Mapping
from dataclasses import asdict, dataclass, fields
from itertools import pairwise
from pathlib import Path
from typing import Any

import numpy as np
from hydra._internal.utils import _locate
from omegaconf import DictConfig, open_dict
from torch.utils.data import Dataset, IterableDataset

from engine.core.dataset_keys import FOLD_KEYS
from engine.core.io import write_json
from engine.data.bad_samples import BadSample
from engine.data.targets import is_multi_hot, rarest_labels
from engine.data.wrapper import DatasetWrapper

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

    folds: int
    fold: int
    fold_seed: int
    train_split_size: int  # samples of the whole train split (N)
    fold_size: int  # samples of this fold (the val set)
    stratified_by: str  # label | rarest label | none (a dataset without targets)
    val_indices: list[int]  # sorted, into the train split
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


class FoldView(DatasetWrapper):
    """Samples `indices` (into the train split `dataset`) as 0..len-1, with the contract
    passed through and `targets` restricted to them; `record` is the job's fold."""

    drawn_split = False  # split.csv would list folds, not the drawn split: fold.json does

    def __init__(self, dataset: Dataset, indices: np.ndarray, record: FoldRecord) -> None:
        super().__init__(dataset)
        self.indices = indices
        self.record = record

    def __len__(self) -> int:
        return len(self.indices)

    def _at(self, index: int) -> int:
        if not 0 <= index < len(self.indices):
            raise IndexError(f"index {index} is outside this fold's {len(self.indices)} samples")
        return int(self.indices[index])

    def __getitem__(self, index: int) -> Any:
        return self.dataset[self._at(index)]  # type: ignore[index]

    def __getitems__(self, indices: list[int]) -> Any:
        if not self.dataset.returns_batches:  # type: ignore[attr-defined]
            return [self[i] for i in indices]
        return self.dataset.__getitems__([self._at(i) for i in indices])  # type: ignore[attr-defined]

    @property
    def targets(self) -> np.ndarray | None:
        targets = self.dataset.targets  # type: ignore[attr-defined]
        return None if targets is None else np.asarray(targets)[self.indices]

    @property
    def blocks(self) -> np.ndarray | None:
        """The split's blocks (dataset=parquet's row groups) as positions of this fold, whose
        indices ascend; None when the split has none (the train order then reads at random)."""
        blocks = getattr(self.dataset, "blocks", None)
        if blocks is None or (np.diff(self.indices) < 0).any():
            return None
        return np.unique(np.searchsorted(self.indices, blocks))

    def get_filename(self, index: int) -> str | None:
        return self.dataset.get_filename(self._at(index))  # type: ignore[attr-defined]

    def check_sample(self, index: int) -> BadSample | None:
        return self.dataset.check_sample(self._at(index))  # type: ignore[attr-defined]

    def sample_source(self, index: int) -> tuple[str, int]:
        """The sample's index in the train split (what a fold's indices refer to)."""
        return self.dataset.sample_source(self._at(index))  # type: ignore[attr-defined]


def cut_folds(train: Dataset, train_as_val: Dataset, spec: FoldSpec) -> tuple[FoldView, FoldView]:
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
    return FoldView(train, rest, record), FoldView(train_as_val, val_indices, record)


def write_fold_file(record: FoldRecord, folder: Path) -> Path:
    """`folder`/fold.json: the job's fold (FoldRecord)."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / FOLD_FILE
    write_json(path, asdict(record))
    return path


FOLD_FIELDS = [f.name for f in fields(FoldRecord)]


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _fold_problem(record: object) -> str | None:
    """What in a parsed fold.json is not a FoldRecord (the field and how), or None."""
    if not isinstance(record, dict):
        return f"holds {type(record).__name__}, not an object of {FOLD_FIELDS}"
    missing = [k for k in FOLD_FIELDS if k not in record]
    extra = [k for k in record if k not in FOLD_FIELDS]
    if missing or extra:
        return f"lacks {missing}" if missing else f"has fields no fold.json has: {extra}"
    ints = ("folds", "fold", "fold_seed", "train_split_size", "fold_size")
    wrong = next((k for k in ints if not _is_int(record[k])), None)
    if wrong is not None:
        return f"its {wrong} is {record[wrong]!r}, not an int"
    folds, fold, size = record["folds"], record["fold"], record["train_split_size"]
    if not 2 <= folds <= size:
        return f"its folds is {folds}, not in 2..train_split_size ({size})"
    if not 0 <= fold < folds:
        return f"its fold is {fold}, outside 0..{folds - 1}"
    indices = record["val_indices"]
    if not isinstance(indices, list) or not all(_is_int(i) for i in indices):
        return "its val_indices is not a list of ints"
    if any(not 0 <= i < size for i in indices) or any(a >= b for a, b in pairwise(indices)):
        return f"its val_indices are not ascending indices in 0..{size - 1}"
    if record["fold_size"] != len(indices):
        return f"its fold_size is {record['fold_size']}, its val_indices hold {len(indices)}"
    prints = record["fingerprints"]
    if not isinstance(prints, list) or len(prints) != folds:
        return f"its fingerprints is not a list of {folds} (one per fold)"
    texts = ("stratified_by", "fingerprint", *(f"fingerprints[{i}]" for i in range(folds)))
    values = (record["stratified_by"], record["fingerprint"], *prints)
    wrong = next((k for k, v in zip(texts, values, strict=True) if not isinstance(v, str)), None)
    return None if wrong is None else f"its {wrong} is not a string"


def _regular_file_bytes(path: Path) -> bytes:
    """The bytes of `path` if it is a regular file of at most MAX_FOLD_BYTES, else ValueError
    (why, without the path): a FIFO would block open() or read() forever and /dev/zero never
    end, hanging the job or the sweep's summary (as engine/data/safe_read.py does for images)."""
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0))
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise ValueError("is not a regular file (a FIFO, a device, a folder?)")
        if info.st_size > MAX_FOLD_BYTES:
            raise ValueError(f"is {info.st_size:,} bytes, more than a fold.json ever holds")
        with os.fdopen(fd, "rb", closefd=False) as f:
            return f.read(MAX_FOLD_BYTES)
    finally:
        os.close(fd)


def read_fold_file(path: Path) -> FoldRecord:
    """A job's fold.json, read as hostile input (a hand edit, a copy from elsewhere): one
    ValueError line naming the file, the field and the fix unless every FoldRecord field is
    there with its type and range."""
    problem: str | None = None
    try:
        data = _regular_file_bytes(path)
    except OSError as err:  # unreadable, a dangling link
        problem = f"cannot be read ({err.strerror})"
    except ValueError as err:  # not a regular file, too large
        problem = str(err)
    try:
        record = None if problem else json.loads(data)
    except RecursionError:  # [[[[...]]]]: json recurses once per level
        problem = "is not JSON (nested too deeply)"
    except ValueError as err:  # not JSON, or not UTF-8
        problem = f"is not JSON ({err})"
    if problem is None:
        problem = _fold_problem(record)
    if problem is not None:
        raise ValueError(
            f"{path} {problem}: this file is the job's own record of its fold; rerun that "
            "job (dataset.fold) to write it again."
        )
    return FoldRecord(**record)
