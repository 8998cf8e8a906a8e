"""`dataset=mix`: several sources, each any dataset node, in one dataset. Its samples are the
concatenation of the sources' splits (source by source, each in its own order), so every
index, label and file name is fixed; the train split's `sources` and `epoch_samples` let the
train order draw each epoch's samples in the sources' weights' proportions (engine/data/mix.py).
"""

from __future__ import annotations

import bisect
import dataclasses
import re
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from hydra.utils import instantiate
from omegaconf import DictConfig, OmegaConf

from engine.core.text import closest
from engine.data.bad_samples import BadSample
from engine.data.datasets.base import MapDataset, StreamDataset, Transform
from engine.data.folds import without_fold_keys
from engine.data.listing import unique_classes
from engine.data.mix import MAX_EPOCH_SAMPLES, EpochSamples, Stratum
from engine.data.targets import is_multi_hot

SOURCE_KEYS = ["dataset", "weight", "demo"]
EXAMPLE = "e.g. +dataset@dataset.sources.extra.dataset=imagefolder +dataset.sources.extra.weight=1"
# a source's name goes into metric keys (val/<name>/acc): `/` nests them in metrics.json, and
# MLflow refuses `,` (after the first epoch); Hydra reads `.` as a nested key
MULTI_LABEL = "a mix maps each sample's one class into the union of the sources' classes"
SOURCE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,63}")


def _plain(node: Any) -> Any:
    return OmegaConf.to_container(node, resolve=True) if isinstance(node, DictConfig) else node


def checked_sources(sources: Any) -> dict[str, tuple[Any, float]]:
    """Each source's (dataset node, weight), or one line naming the key at fault and the fix."""
    plain = _plain(sources)
    if not isinstance(plain, Mapping) or not plain:
        raise ValueError(
            f"dataset.sources={plain!r}: expected one or more named sources, each with a "
            f"`dataset` node and a `weight` ({EXAMPLE}; see conf/dataset/mix.yaml)."
        )
    checked = {}
    for name, source in plain.items():
        key = f"dataset.sources.{name}"
        if source is None:  # how an experiment drops a source: Hydra merges, never deletes
            continue
        if not isinstance(name, str) or not SOURCE_NAME.fullmatch(name):
            raise ValueError(
                f"{key}: source name {name!r} goes into metric keys (val/<name>/acc), which "
                "loggers split or refuse at other characters: name it with 1 to 64 letters, "
                "digits, `_` or `-`, starting with a letter or digit (e.g. "
                f"{re.sub(r'[^A-Za-z0-9_-]+', '_', str(name)).strip('_-')[:64] or 'extra'!r})."
            )
        if not isinstance(source, Mapping):
            raise ValueError(
                f"{key}={source!r}: expected a mapping with `dataset` (a dataset node) and "
                f"`weight` (its share of an epoch), {EXAMPLE}."
            )
        for unknown in sorted(set(source) - set(SOURCE_KEYS)):
            near = closest(unknown, SOURCE_KEYS)
            hint = f" (did you mean {key}.{near}?)" if near else ""
            raise ValueError(
                f"{key}.{unknown}: unknown key{hint}; a source has `dataset` (a dataset node), "
                "`weight` (its share of an epoch) and `demo` (true: the demo's own) only: "
                f"remove it (~{key}.{unknown})."
            )
        node, weight = source.get("dataset"), source.get("weight")
        if not isinstance(node, Mapping) or "_target_" not in node:
            raise ValueError(
                f"{key}.dataset={node!r}: expected a dataset node with a `_target_` (as in "
                f"conf/dataset/*.yaml), e.g. +dataset@{key}.dataset=imagefolder."
            )
        if node["_target_"] == f"{__name__}.{MixDataset.__name__}":
            raise ValueError(
                f"{key}.dataset is itself a mix: list its sources in dataset.sources instead."
            )
        if node.get("multi_label"):  # before any source reads a file
            raise ValueError(
                f"{key}.dataset.multi_label={node['multi_label']}: {MULTI_LABEL}, so a "
                "multi-label source cannot be mixed: train on it alone (dataset=<its kind>)."
            )
        number = isinstance(weight, (int, float)) and not isinstance(weight, bool)
        if not number or not 0 < weight < float("inf"):
            raise ValueError(
                f"{key}.weight={weight!r}: expected a number > 0 (the source's share of an "
                f"epoch, relative to the other sources' weights), e.g. {key}.weight=0.5."
            )
        if not isinstance(source.get("demo", False), bool):
            raise ValueError(
                f"{key}.demo={source['demo']!r}: expected true or false (true marks the demo's "
                "own sources, conf/dataset/mix.yaml)."
            )
        checked[name] = (node, float(weight))
    if not checked:
        raise ValueError(
            f"dataset.sources: every source is null (dropped); name one or more, {EXAMPLE}."
        )
    _refuse_unnamed_demo(plain)
    return checked


def _refuse_unnamed_demo(sources: Mapping[str, Any]) -> None:
    """The demo's sources (`demo: true`, conf/dataset/mix.yaml) next to sources the user added:
    Hydra merges an experiment's (or the command line's) `dataset.sources` into the demo's
    instead of replacing them, so the demo's would train though nobody named them."""
    kept = {k: v for k, v in sources.items() if v is not None}
    demo = [name for name, source in kept.items() if source.get("demo", False)]
    added = [name for name in kept if name not in demo]
    if demo and added:
        raise ValueError(
            f"dataset.sources: the demo's sources {demo} (conf/dataset/mix.yaml) would train "
            f"beside yours {added}, as Hydra merges sources instead of replacing them: drop "
            f"each (`{demo[0]}: null` in an experiment, '~dataset.sources.{demo[0]}' on the "
            f"command line), or keep it with dataset.sources.{demo[0]}.demo=false."
        )


def _built(
    name: str, node: Any, split: str, transform: Transform | None, classes: Sequence[str] | None
) -> MapDataset:
    """Source `name`'s `split`, built as build_splits builds a dataset node."""
    shared = {} if classes is None else {"classes": list(classes)}
    key = f"dataset.sources.{name}.dataset"
    if node.get("folds") is not None:
        raise ValueError(
            f"{key}.folds={node['folds']}: a mix's source cannot be cut into folds; "
            f"cross-validate the source on its own (dataset=<its kind>), or leave {key}.folds out."
        )
    dataset = instantiate(without_fold_keys(node), split=split, transform=transform, **shared)
    if isinstance(dataset, StreamDataset) or not isinstance(dataset, MapDataset):
        raise ValueError(
            f"{key}._target_={node['_target_']}: a {type(dataset).__name__} is not a map-style "
            "dataset under the contract (engine.data.datasets.base.MapDataset); a mix "
            "concatenates indexed samples: use an indexed kind (imagefolder, csv, tensor, ...)."
        )
    if not list(getattr(dataset, "classes", None) or []):
        raise ValueError(
            f"{key}._target_={node['_target_']}: it has no class names (`classes`), and a mix "
            "matches classes by name across sources: use a labelled dataset kind."
        )
    if dataset.multi_label or (dataset.targets is not None and is_multi_hot(dataset.targets)):
        raise ValueError(
            f"{key}._target_={node['_target_']}: its samples are multi-label, and "
            f"{MULTI_LABEL}: train on it alone (dataset=<its kind>)."
        )
    if len(dataset) == 0:
        raise ValueError(f"{key}: its {split} split has no samples; point it at data or drop it.")
    return dataset


class MixDataset(MapDataset):
    """`dataset=mix`: the concatenation of each source's `split`, labelled by the sorted union
    of the sources' class names; each epoch of the train split draws `epoch_samples` samples
    (null: the sum of the sources' sizes) in the proportions of the sources' weights."""

    def __init__(
        self,
        split: str,
        sources: dict[str, Any],
        transform: Transform | None = None,
        classes: Sequence[str] | None = None,
        epoch_samples: EpochSamples | None = None,
    ) -> None:
        if epoch_samples is not None and not 1 <= epoch_samples <= MAX_EPOCH_SAMPLES:
            raise ValueError(  # the config check says so first; this holds for the API too
                f"dataset.epoch_samples={epoch_samples}: expected 1 to {MAX_EPOCH_SAMPLES:,} "
                "(each epoch's draw is built up front); train more epochs instead."
            )
        nodes = checked_sources(sources)
        if classes is not None:  # dataset.classes, or the train split's: before any source
            classes = unique_classes(classes)
        self.parts = [
            _built(name, node, split, transform, classes) for name, (node, _) in nodes.items()
        ]
        # each source's classes as class names (NFC): the union matches them by name
        own = [
            unique_classes(part.classes, f"dataset.sources.{name}.dataset's classes")
            for name, part in zip(nodes, self.parts, strict=True)
        ]
        self.classes = sorted(set().union(*own)) if classes is None else list(classes)
        position = {name: i for i, name in enumerate(self.classes)}
        self.relabel = [np.array([position[c] for c in names], dtype=np.int64) for names in own]
        stops = np.cumsum([len(part) for part in self.parts]).tolist()
        self.stops = stops
        self.sources = tuple(
            Stratum(name, stop - len(part), stop, weight)
            for (name, (_, weight)), part, stop in zip(
                nodes.items(), self.parts, stops, strict=True
            )
        )
        if split == "train":
            self.epoch_samples = len(self) if epoch_samples is None else epoch_samples
        labels = [part.targets for part in self.parts]
        if all(t is not None for t in labels):
            self.targets = np.concatenate(
                [
                    r[np.asarray(t, dtype=np.int64)]
                    for r, t in zip(self.relabel, labels, strict=True)
                ]
            )
        skipping = [part for part in self.parts if part.on_error == "skip"]
        self.on_error = "skip" if skipping else "raise"
        self.max_bad_fraction = min((p.max_bad_fraction for p in skipping), default=0.0)
        self.draws_random = any(part.draws_random for part in self.parts)
        self.in_memory = all(part.in_memory for part in self.parts)  # type: ignore[misc]
        self.files_checkable = all(part.files_checkable for part in self.parts)  # type: ignore[misc]
        self.drawn_split = any(part.drawn_split for part in self.parts)

    def __len__(self) -> int:
        return self.stops[-1]

    def _where(self, index: int) -> tuple[int, int]:
        """(source number, index within it) of concatenation index `index`."""
        if not 0 <= index < len(self):
            raise IndexError(f"index {index} is outside the mix's {len(self)} samples")
        k = bisect.bisect_right(self.stops, index)
        return k, int(index) - self.sources[k].start

    def __getitem__(self, index: int) -> Any:
        k, local = self._where(index)
        sample = self.parts[k][local]
        if isinstance(sample, BadSample):  # the ledger counts it by its index in the mix
            return dataclasses.replace(sample, index=int(index))
        inputs, label, *extras = sample
        return (inputs, int(self.relabel[k][int(label)]), *extras)

    def sample_source(self, index: int) -> tuple[str, int]:
        k, local = self._where(index)
        return self.sources[k].name, local

    def get_filename(self, index: int) -> str | None:
        k, local = self._where(index)
        return self.parts[k].get_filename(local)

    def check_sample(self, index: int) -> BadSample | None:
        k, local = self._where(index)
        bad = self.parts[k].check_sample(local)
        return None if bad is None else dataclasses.replace(bad, index=int(index))

    def set_epoch(self, epoch: int) -> None:
        for part in self.parts:
            part.set_epoch(epoch)
