"""The metric keys each mode returns (its metrics.json, a sweep summary's columns), written
once. The first key of a mode ranks its sweep jobs when summary.rank_by is null.

A leaf: it imports nothing of the engine, so the config checks and the sweep callback read it
without importing the modes themselves.
"""

from collections.abc import Mapping
from typing import Any

EVAL_SPLITS = ("val", "test")  # the labelled splits mode=eval measures (eval.split)
# what a training measures besides its metrics (train/loss and after it)
TRAIN_MEASURES = (
    "train/loss",
    "train/samples_per_s",
    "train/data_wait_frac",
    "train/first_batch_s",
    "epochs",
    "wall_s",
)


def metric_names(metrics: Mapping[str, Any]) -> tuple[str, ...]:
    """The names of the `metrics` group's entries that are metrics (have a `_target_`), not
    plain settings such as metrics.threshold."""
    return tuple(str(k) for k, v in metrics.items() if isinstance(v, Mapping) and "_target_" in v)


def train_keys(names: tuple[str, ...] | list[str]) -> tuple[str, ...]:
    """mode=train's keys for the metrics `names` (cfg.metrics entries with a `_target_`, in
    order): val/<first>, val/loss, val/best_<first>, the other val/<m>, then TRAIN_MEASURES.
    ("acc",) gives METRICS_BY_MODE["train"]."""
    if not names:  # no metrics: the loss is all a val pass measures
        return ("val/loss", *TRAIN_MEASURES)
    first, *others = names
    return (
        f"val/{first}",
        "val/loss",
        f"val/best_{first}",
        *(f"val/{m}" for m in others),
        *TRAIN_MEASURES,
    )


METRICS_BY_MODE: dict[str, tuple[str, ...]] = {
    "train": train_keys(("acc",)),
    "eval": tuple(f"{s}/{m}" for s in EVAL_SPLITS for m in ("acc", "loss", "acc_per_class")),
    "predict": ("predict/samples", "predict/unreadable"),
    "benchmark": (
        "loader/samples_per_s",
        "loader/samples_per_s_min",
        "loader/samples_per_s_max",
        "loader/batches_per_s",
        "loader/first_batch_s",
        "loader/data_wait_frac",
        "loader/cpu_ms_per_sample",
        "loader/peak_rss_mb",
    ),
    "inspect": ("inspect/warnings",),
    "validate": ("validate/samples", "validate/bad", "validate/bad_frac", "wall_s"),
    "cache": ("cache/images_per_s", "cache/images", "cache/written", "cache/mb", "wall_s"),
    "shards": ("shards/samples_per_s", "shards/samples", "shards/shards", "shards/mb", "wall_s"),
}


def mode_keys(mode: str, metrics: Mapping[str, Any]) -> tuple[str, ...]:
    """The keys of `mode` (METRICS_BY_MODE), train's following the configured `metrics`."""
    return train_keys(metric_names(metrics)) if mode == "train" else METRICS_BY_MODE[mode]
