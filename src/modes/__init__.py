"""What train.py can do (`mode=`), one module per mode, each with the metric keys it returns."""

from collections.abc import Callable
from typing import Any, NamedTuple

from omegaconf import DictConfig

from src.modes import benchmark, cache, evaluation, inspect, prediction, shards, train, validate
from src.training.summary import METRIC_KEYS as TRAIN_METRICS


class Mode(NamedTuple):
    """A mode: the function train.py calls with the config, and the keys of what it returns
    (the first ranks sweep jobs by default: summary.rank_by null)."""

    run: Callable[[DictConfig], dict[str, Any]]
    metric_keys: tuple[str, ...]


MODES = {
    "train": Mode(train.train, TRAIN_METRICS),
    "eval": Mode(evaluation.evaluate_checkpoint, evaluation.METRIC_KEYS),
    "predict": Mode(prediction.predict, prediction.METRIC_KEYS),
    "benchmark": Mode(benchmark.benchmark, benchmark.METRIC_KEYS),
    "inspect": Mode(inspect.inspect, inspect.METRIC_KEYS),
    "validate": Mode(validate.validate, validate.METRIC_KEYS),
    "cache": Mode(cache.cache, cache.METRIC_KEYS),
    "shards": Mode(shards.shards, shards.METRIC_KEYS),
}
METRICS_BY_MODE = {name: mode.metric_keys for name, mode in MODES.items()}
