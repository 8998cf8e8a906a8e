"""What train.py can do besides training, one module per mode, and each mode's metric keys."""

from src.modes.benchmark import METRIC_KEYS as BENCHMARK_METRICS
from src.modes.cache import METRIC_KEYS as CACHE_METRICS
from src.modes.inspect import METRIC_KEYS as INSPECT_METRICS
from src.modes.shards import METRIC_KEYS as SHARDS_METRICS
from src.modes.validate import METRIC_KEYS as VALIDATE_METRICS
from src.training.summary import METRIC_KEYS as TRAIN_METRICS

# The first key of each mode ranks sweeps by default (summary.rank_by: null).
METRICS_BY_MODE = {
    "train": TRAIN_METRICS,
    "benchmark": BENCHMARK_METRICS,
    "inspect": INSPECT_METRICS,
    "validate": VALIDATE_METRICS,
    "cache": CACHE_METRICS,
    "shards": SHARDS_METRICS,
}
