"""dataset=mix's MixDataset, built from its classes: two image folders of different sizes and
class sets mixed 0.75 / 0.25 draw each source's share per epoch (the smaller repeats only after
all its samples, the larger is subsampled anew), seeded and resumable orders, two ranks'
disjoint shares, the val split reported per source and whole, and the numbers and names that
pass the type check and still break refused in one line naming the key. The template keeps
dataset=mix as its conf/ composes and trains it (tests/test_mix.py)."""

from __future__ import annotations

from collections import Counter
from functools import partial
from pathlib import Path

import pytest
import torch
from torch import nn
from torch.utils.data import DataLoader

from engine.data.datasets.base import MapDataset
from engine.data.datasets.mix import MixDataset
from engine.data.loaders import build_loaders, make_loader
from engine.data.samplers import Draw, RandomOrder, SequentialOrder, WeightedOrder
from engine.data.seeded import seeded
from engine.training.batches import BatchMover
from engine.training.device import resolve_precision
from engine.training.evaluate import evaluate
from engine_dev.small_sets import loader_settings
from tests.test_totals import Hits  # a project's top-1 accuracy

FOLDER = "engine.data.datasets.imagefolder.ImageFolderDataset"


def _sources(big: Path, small: Path, **weights: float) -> dict:
    weights = {"big": 0.75, "small": 0.25} | weights
    roots = {"big": big, "small": small}
    return {
        name: {"dataset": {"_target_": FOLDER, "root": str(roots[name])}, "weight": w}
        for name, w in weights.items()
    }


def _mix(mix_sources: tuple[Path, Path], split: str = "train", **keys: object) -> MixDataset:
    return MixDataset(split=split, sources=_sources(*mix_sources), **keys)  # type: ignore[arg-type]


def _epoch(sampler: RandomOrder | WeightedOrder | SequentialOrder, epoch: int) -> list[int]:
    sampler.set_epoch(epoch)
    return list(sampler)


def test_each_epoch_draws_the_weights_shares(mix_sources: tuple[Path, Path]) -> None:
    mix = _mix(mix_sources)
    assert mix.epoch_samples == len(mix) == 126  # null: the sum of the sources' sizes
    sampler = RandomOrder(mix, seed=3)
    for epoch in range(1, 5):
        order = _epoch(sampler, epoch)
        counts = Counter(mix.sample_source(i)[0] for i in order)
        assert len(order) == 126
        assert abs(counts["big"] / 126 - 0.75) <= 0.03
        assert abs(counts["small"] / 126 - 0.25) <= 0.03


def test_smaller_source_repeats_only_after_all_its_samples(mix_sources: tuple[Path, Path]) -> None:
    mix = _mix(mix_sources)
    sampler = RandomOrder(mix, seed=3)
    for epoch in (1, 2):
        small = [i for i in _epoch(sampler, epoch) if mix.sample_source(i)[0] == "small"]
        assert len(small) == 31  # 26 samples, a share of 31: each once, then 5 again
        assert sorted(small[:26]) == list(range(100, 126))
        assert len(set(small[26:])) == 5
        assert all(isinstance(i, Draw) and i.occurrence == 1 for i in small[26:])
        assert not any(isinstance(i, Draw) for i in small[:26])


def test_larger_source_is_subsampled_anew_each_epoch(mix_sources: tuple[Path, Path]) -> None:
    mix = _mix(mix_sources)
    sampler = RandomOrder(mix, seed=3)
    drawn = []
    for epoch in (1, 2):
        big = [i for i in _epoch(sampler, epoch) if mix.sample_source(i)[0] == "big"]
        assert len(big) == len(set(big)) == 95  # of 100, without replacement
        drawn.append(set(big))
    assert drawn[0] != drawn[1]


def test_classes_are_the_sorted_union_by_name(mix_sources: tuple[Path, Path]) -> None:
    mix = _mix(mix_sources)
    assert mix.classes == ["circle", "square", "star"]
    for i in (0, 99, 100, 125):
        _, label = mix[i]
        folder = Path(mix.get_filename(i)).parent.name  # type: ignore[arg-type]
        assert mix.classes[label] == mix.classes[mix.targets[i]] == folder
    assert mix.sample_source(105) == ("small", 5)
    val = _mix(mix_sources, split="val", classes=mix.classes)
    assert [s.name for s in val.sources] == ["big", "small"] and val.epoch_samples is None
    assert sorted({mix.classes[t] for t in val.targets[12:]}) == ["square", "star"]


def test_orders_are_seeded_and_resume_exactly(mix_sources: tuple[Path, Path]) -> None:
    mix = _mix(mix_sources, epoch_samples=50)
    first = _epoch(RandomOrder(mix, seed=3), 2)
    assert first == _epoch(RandomOrder(mix, seed=3), 2) and len(first) == 50
    assert first != _epoch(RandomOrder(mix, seed=4), 2)
    resumed = RandomOrder(mix, seed=3)
    resumed.set_epoch(2)
    resumed.skip(20)
    assert list(resumed) == first[20:]


def test_sequential_order_keeps_each_source_in_its_order(mix_sources: tuple[Path, Path]) -> None:
    mix = _mix(mix_sources)
    order = [int(i) for i in _epoch(SequentialOrder(mix), 1)]
    assert order[95:] == list(range(100, 126)) + sorted(order[121:])  # small: whole, then part
    assert order[:95] == sorted(order[:95])


def test_weighted_keeps_source_weights_and_balances_classes_within(
    mix_sources: tuple[Path, Path],
) -> None:
    mix = _mix(mix_sources, epoch_samples=1000)
    order = _epoch(WeightedOrder(mix, seed=5), 1)
    sources = Counter(mix.sample_source(i)[0] for i in order)
    assert sources == {"big": 750, "small": 250}
    small = Counter(mix.classes[mix.targets[i]] for i in order if i >= 100)
    assert abs(small["star"] / 250 - 0.5) <= 0.1  # 10 of its 26 samples, drawn half the time


def test_two_ranks_share_the_epoch_disjointly(mix_sources: tuple[Path, Path]) -> None:
    mix = _mix(mix_sources)
    whole = _epoch(RandomOrder(mix, seed=3), 1)
    shares = []
    for rank in (0, 1):
        sampler = RandomOrder(mix, seed=3)
        sampler.distribute(rank, 2)
        shares.append([int(i) for i in _epoch(sampler, 1)])
    assert len(shares[0]) == len(shares[1]) == 63
    assert Counter(shares[0] + shares[1]) == Counter(int(i) for i in whole)


class Unlabelled(MapDataset):
    """A dataset kind without class names."""

    def __init__(self, split: str, transform: object = None, classes: object = None) -> None:
        self.classes = []

    def __len__(self) -> int:
        return 1


@pytest.mark.parametrize(
    ("sources", "says"),
    [
        ({}, "dataset.sources={}: expected one or more named sources"),
        (
            {"a": {"dataset": {"_target_": FOLDER}, "wieght": 1}},
            "dataset.sources.a.wieght: unknown",
        ),
        (
            {"a": {"dataset": {"_target_": FOLDER}, "weight": 0}},
            "dataset.sources.a.weight=0: expec",
        ),
        ({"a": {"weight": 1}}, "dataset.sources.a.dataset=None: expected a dataset node"),
        (
            {"a": {"dataset": {"_target_": f"{__name__}.Unlabelled"}, "weight": 1}},
            "has no class names",
        ),
    ],
)
def test_bad_sources_are_refused_by_key(sources: dict, says: str) -> None:
    with pytest.raises(ValueError) as refused:
        MixDataset(split="train", sources=sources)
    assert says in str(refused.value) and "\n" not in str(refused.value)


def _val_loader(mix_sources: tuple[Path, Path], rank: int = 0, world_size: int = 1) -> DataLoader:
    train_set = seeded(_mix(mix_sources), 0)
    val_set = seeded(_mix(mix_sources, split="val", classes=train_set.classes), 0)
    order = partial(RandomOrder, seed=0)
    return build_loaders(
        train_set, val_set, loader_settings(5, shuffle=True), order, None, rank, world_size
    )[1]


def test_val_sources_are_shared_disjointly_by_two_ranks(mix_sources: tuple[Path, Path]) -> None:
    shares = [_val_loader(mix_sources, rank, 2).per_source for rank in (0, 1)]  # type: ignore[attr-defined]
    for name, size in (("big", 12), ("small", 8)):
        seen = [[int(i) for i in share[name].sampler] for share in shares]
        assert sorted(seen[0] + seen[1]) == list(range(size))


def test_val_reports_each_source_and_the_whole(mix_sources: tuple[Path, Path]) -> None:
    val_loader = _val_loader(mix_sources)
    val_set, settings = val_loader.dataset, loader_settings(5, shuffle=True)
    torch.manual_seed(0)
    model = nn.Sequential(nn.Flatten(), nn.LazyLinear(3))
    move = BatchMover(torch.device("cpu"), lambda x, layout: x.float() / 255, False)
    args = (move, resolve_precision("32", torch.device("cpu")), nn.CrossEntropyLoss())
    metrics = {"acc": Hits()}
    mixed = evaluate(model, val_loader, *args, metrics)
    whole = evaluate(model, make_loader(val_set, settings, None, False, "val"), *args, metrics)
    for key in ("val/loss", "val/acc"):
        assert mixed[key] == pytest.approx(whole[key])
    sizes = {"big": 12, "small": 8}
    for key in ("loss", "acc"):
        parts = sum(mixed[f"val/{name}/{key}"] * n for name, n in sizes.items())
        assert parts / 20 == pytest.approx(whole[f"val/{key}"])


def test_weights_near_the_float_limit_still_draw_the_whole_epoch(
    mix_sources: tuple[Path, Path],
) -> None:
    """Two weights of 1.7e308 sum to inf: each epoch drew 2 samples instead of 36."""
    sources = _sources(*mix_sources)
    for source in sources.values():
        source["weight"] = 1.7e308
    mix = MixDataset(split="train", sources=sources, epoch_samples=36)
    order = _epoch(RandomOrder(mix, seed=0), 1)
    assert Counter(mix.sample_source(i)[0] for i in order) == {"big": 18, "small": 18}


def test_an_epoch_past_the_limit_is_refused_by_the_dataset(mix_sources: tuple[Path, Path]) -> None:
    with pytest.raises(ValueError, match=r"^dataset.epoch_samples=2147483647: expected 1 to 10,"):
        _mix(mix_sources, epoch_samples=2**31 - 1)


def test_a_multi_label_source_is_refused_before_any_source_is_read(
    mix_sources: tuple[Path, Path], demo_dir: Path
) -> None:
    listing = str(demo_dir / "multilabel" / "labels.csv")
    tagged = {"_target_": "engine.data.datasets.csv.CsvDataset", "csv": listing}
    sources = _sources(*mix_sources) | {
        "tags": {"dataset": tagged | {"multi_label": True}, "weight": 1}
    }
    with pytest.raises(ValueError) as refused:
        MixDataset(split="train", sources=sources)
    said = str(refused.value)
    assert said.startswith("dataset.sources.tags.dataset.multi_label=True: a mix maps")
    assert "\n" not in said


@pytest.mark.parametrize("name", ["a/b", "a,b", "a b", "-a", "é", "x" * 65])
def test_a_source_name_loggers_cannot_keep_is_refused(
    mix_sources: tuple[Path, Path], name: str
) -> None:
    """`a/b` lost its keys from metrics.json, `a,b` failed in MLflow after the first epoch."""
    sources = {name: _sources(*mix_sources)["big"]}
    with pytest.raises(ValueError) as refused:
        MixDataset(split="train", sources=sources)
    said = str(refused.value)
    assert said.startswith(f"dataset.sources.{name}: source name {name!r} goes into metric keys")
    assert "\n" not in said
