"""Every option of every config group composes and instantiates."""

from __future__ import annotations

import re
import warnings

import pytest
import torch
from hydra.errors import InstantiationException
from hydra.utils import get_class, instantiate
from torch import nn

from engine.api import DeviceBatch, GatheredMetric, Logger, MapDataset, Metric, StreamDataset
from engine_dev.api import (
    Labels,
    build_metrics,
    build_model,
    build_optimizer,
    config_tree,
    without_fold_keys,
)
from tests.conftest import CONF_DIR, ENGINE_CONF_DIR, ROOT, group_options

BLOCK_SCALAR = re.compile(r":\s*[|>][-+]?\s*(#.*)?$")  # `key: |`: the lines below are its text

# experiment and debug bundles set global keys: test_experiments.py checks each applies its own
OPTIONS = group_options("experiment", "debug")
GROUPS = sorted({group for group, _ in OPTIONS})
# datasets the test demo set provides files for; ones you add are composed, not loaded, here
DEMO_DATASETS = {"imagefolder", "csv", "tensor", "iterable", "parquet", "sequences"}


def test_every_group_has_options() -> None:
    assert set(GROUPS) >= {
        "dataset",
        "loader",
        "sampler",
        "transforms",
        "model",
        "optimizer",
        "scheduler",
        "trainer",
    }
    assert {o for g, o in OPTIONS if g == "dataset"} >= {
        "imagefolder",
        "csv",
        "tensor",
        "iterable",
        "parquet",
    }


def _model_inputs(node) -> tuple[torch.Tensor, ...]:
    """Two samples of what the model takes: padded tokens (+ lengths, mask) or 3x48x48 images."""
    if "vocab_size" in node.keys():  # noqa: SIM118 (`in node` is False while it is ???)
        return torch.ones(2, 4, dtype=torch.long), torch.tensor([4, 2]), torch.ones(2, 4).bool()
    return (torch.zeros(2, 3, 48, 48),)


def _image_batch() -> DeviceBatch:
    """Four normalised 3x48x48 images of classes 0-3, as the loop hands them to the step."""
    return DeviceBatch(torch.randn(4, 3, 48, 48), torch.arange(4), ())


@pytest.mark.parametrize(("group", "option"), OPTIONS)
def test_option_composes_and_instantiates(make_cfg, group: str, option: str) -> None:
    if group == "sweep":  # presets are appended, not chosen, and set global keys
        searches = {"optuna", "kfold"}  # trainings; the other presets time loaders
        assert make_cfg(f"+sweep={option}").mode == ("train" if option in searches else "benchmark")
        return
    if group == "collate":  # fills loader.collate_fn (null by default)
        collate = instantiate(make_cfg(f"collate={option}").loader).collate_fn
        assert collate is not None and callable(collate)
        return
    # transforms=model follows a pretrained model's data config: that of model=timm's
    cfg = make_cfg(f"{group}={option}", *(["model=timm"] if option == "model" else []))
    if group == "local":  # this machine's global keys (tests/test_local_paths.py)
        assert cfg.paths.data_dir
        return
    if group == "logger":  # one node per chosen logger; the run builds it (tests/test_loggers.py)
        assert issubclass(get_class(cfg.logger[option]._target_), Logger)
        return
    node = cfg[group]
    if group == "metrics":  # a mapping of name -> Metric (plain keys: shared settings)
        metrics = build_metrics(node)
        assert metrics and all(isinstance(m, Metric | GatheredMetric) for m in metrics.values())
        return
    if "_target_" not in node:  # a group of settings alone (yours may be): composing is its check
        return
    if group == "dataset":  # build_splits refuses a class outside the dataset contract
        assert issubclass(get_class(node._target_), (MapDataset, StreamDataset))
    if group == "dataset" and option in ("cifar10", "mnist", "fashion_mnist"):
        with pytest.raises(InstantiationException, match=r"dataset\.download=true"):  # no files
            instantiate(without_fold_keys(node), split="train", transform=None)
    elif group == "dataset" and option in DEMO_DATASETS:  # others have no demo files
        dataset = instantiate(without_fold_keys(node), split="train", transform=None)
        assert len(dataset) > 0 and len(dataset.classes) == (3 if option == "sequences" else 5)
    elif group == "model":
        model = build_model(node, num_classes=5, input_shape=(3, 48, 48), vocab_size=32).eval()
        assert model(*_model_inputs(node)).shape == (2, 5)  # one logit per class
    elif group == "optimizer":  # over a model's parameter groups (optimizer.layer_decay, ...)
        optimizer = build_optimizer(node, nn.Linear(2, 2))
        assert {group["lr"] for group in optimizer.param_groups} == {node.lr}
    elif group == "batch_transforms":  # built with the data's class count
        mixed = instantiate(node)(num_classes=5)(_image_batch(), epoch=1)
        assert mixed.labels.shape == (4, 5) and torch.allclose(mixed.labels.sum(1), torch.ones(4))
    elif group == "scheduler":
        optimizer = build_optimizer(cfg.optimizer, nn.Linear(2, 2))
        schedule = instantiate(node)(optimizer, total_steps=10)
        rates = []
        for _ in range(10):
            rates.append(optimizer.param_groups[0]["lr"])
            optimizer.step()
            schedule.step()
        # the peak is optimizer.lr, never exceeded, never negative
        assert max(rates) == pytest.approx(cfg.optimizer.lr) and min(rates) >= 0, rates
    elif group == "sampler":  # a factory taking the train dataset
        sampler = instantiate(node)(Labels([0, 1] * 10, 2))
        sampler.set_epoch(1)
        drawn = [int(i) for i in sampler]
        assert len(drawn) == 20 and set(drawn) <= set(range(20))
    elif group != "dataset":
        obj = instantiate(node)
        expected = {  # the engine's settings classes (engine/docs/engine.md's `_target_` table)
            "loader": "LoaderSettings",
            "transforms": "Pipelines",
            "trainer": "TrainerSettings",
            "benchmark": "BenchmarkSettings",
            "inspect": "InspectSettings",
            "cache": "CacheSettings",
            "shards": "ShardSettings",
            "eval": "EvalSettings",
            "predict": "PredictSettings",
        }
        if group in expected:  # a group you add: instantiating it is the check
            assert type(obj).__name__ == expected[group]


def test_model_takes_shape_and_classes_from_data(make_cfg) -> None:
    """One logit per class, from images of the data's shape, through the default model's
    forward; one that takes no input_shape (torchvision's resnet18) is built for RGB."""
    cfg = make_cfg()
    channels = 1 if "input_shape" in cfg.model.keys() else 3  # noqa: SIM118 (??? is not in)
    model = build_model(cfg.model, num_classes=7, input_shape=(channels, 32, 32)).eval()
    assert model(torch.zeros(2, channels, 32, 32)).shape == (2, 7)


def test_model_key_that_contradicts_data_is_refused(make_cfg) -> None:
    cfg = make_cfg("model.num_classes=3")
    with pytest.raises(ValueError, match=r"model\.num_classes=3 disagrees with the data"):
        build_model(cfg.model, num_classes=5, input_shape=(3, 48, 48))


def test_every_yaml_key_has_a_comment() -> None:
    """A value line explains itself: a comment on the line, or a comment line right above
    (the text of a block scalar, `key: |` as hydra.help.template, is no key). A style rule:
    it fails the template repo (its CI), and in a project made by `make new-project` (no
    engine/ folder) its findings are reported, as lint's are, never failing the user's
    tests."""
    findings = []
    for path in [*CONF_DIR.rglob("*.yaml"), *ENGINE_CONF_DIR.rglob("*.yaml")]:
        lines = path.read_text().splitlines()
        block = None  # the indentation of the block scalar's key the lines below may be text of
        for number, line in enumerate(lines, 1):
            body = line.strip()
            indent = len(line) - len(line.lstrip())
            if block is not None and (not body or indent > block):
                continue
            block = indent if BLOCK_SCALAR.search(line) else None
            if not body or body.startswith(("#", "- ")) or body.endswith(":"):
                continue
            if body.startswith(("_target_:", "_partial_:")):
                continue  # the file's header comment says what is instantiated
            above = lines[number - 2].strip() if number > 1 else ""
            if "#" not in line and not above.startswith("#"):
                findings.append(f"{path.name}:{number}: {line!r}")
    if (ROOT / "engine" / "pyproject.toml").is_file():
        assert not findings, findings
    elif findings:
        warnings.warn(
            f"style: a YAML key without a comment on its line or the line above: "
            f"{'; '.join(findings)} (reported, not failing: a project's own style)",
            stacklevel=1,
        )


def test_config_tree_shows_choices_and_changed_values() -> None:
    tree = config_tree(
        {"dataset": "csv", "loader": "default", "debug": None, "hydra/launcher": "basic"},
        ["loader.num_workers=2", "mode=benchmark"],
    )
    assert tree.splitlines() == [
        "config",
        "├── dataset: csv",
        "├── loader: default  (loader.num_workers=2)",
        "└── overrides: mode=benchmark",
    ]
