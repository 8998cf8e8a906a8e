"""The metric keys each mode returns (its metrics.json, a sweep summary's columns), written
once. The first key of a mode ranks its sweep jobs when summary.rank_by is null.

A leaf: it imports nothing, so the config checks and the sweep callback read it without
importing the modes themselves.
"""

EVAL_SPLITS = ("val", "test")  # the labelled splits mode=eval measures (eval.split)
MULTI_LABEL_EVAL = ("map", "f1", "subset_acc")  # what mode=eval adds for a multi-label model

# The input pipeline's stages (trainer.pipeline_timing, engine/measure/stages.py): in the
# loader workers per sample, in the main process per batch; each one's key pipeline/<stage>_ms
WORKER_STAGES = ("read", "decode", "transform", "collate")
MAIN_STAGES = ("wait", "h2d", "step")
PIPELINE_KEYS = tuple(f"pipeline/{stage}_ms" for stage in WORKER_STAGES + MAIN_STAGES)

# trainer.ema.decay: the moving average's val/* are val/ema_* (val/ema_loss, val/ema_acc)
EMA_PREFIX = "val/ema_"


# Better smaller besides a loss (lower_is_better): a time, a share of time spent waiting, memory,
# warnings; every other key is better larger (an accuracy, a throughput)
LOWER_IS_BETTER = frozenset(
    {
        "train/data_wait_frac",
        "train/first_batch_s",
        "wall_s",
        "loader/first_batch_s",
        "loader/data_wait_frac",
        "loader/cpu_ms_per_sample",
        "loader/peak_rss_mb",
        "inspect/warnings",
    }
)


def lower_is_better(key: str) -> bool:
    """Whether a smaller `key` is better: a loss (any split's, the EMA's val/ema_loss) or one of
    LOWER_IS_BETTER. The one rule for a sweep's ranking, its search's direction and a null
    trainer.checkpoint.mode."""
    return key.rsplit("/", 1)[-1] in ("loss", "ema_loss") or key in LOWER_IS_BETTER


def is_count(key: str) -> bool:
    """Whether `key` counts samples (train/samples, val/samples, val/ema_samples): a size, not
    a measurement: no curve, no epoch-line figure, nothing to rank by."""
    return key.rsplit("/", 1)[-1] in ("samples", "ema_samples")


# a training's keys besides each metric's val/<name> and val/best_<name> (train_keys)
TRAIN_KEYS = (
    "val/samples",  # the val samples each val/* was measured on (an accuracy's noise)
    "train/loss",
    "train/samples_per_s",
    "train/data_wait_frac",
    "train/first_batch_s",
    "epochs",
    "wall_s",
    *PIPELINE_KEYS,
)


def train_keys(names: list[str] | tuple[str, ...]) -> tuple[str, ...]:
    """A training's metrics.json keys for the metrics group's metric `names`: the first
    metric's val/<name> (what ranks a sweep), val/loss, its best, then the others' and
    TRAIN_KEYS."""
    first = [f"val/{names[0]}", "val/loss", f"val/best_{names[0]}"] if names else ["val/loss"]
    rest = [key for name in names[1:] for key in (f"val/{name}", f"val/best_{name}")]
    return (*first, *rest, *TRAIN_KEYS)


METRICS_BY_MODE: dict[str, tuple[str, ...]] = {
    "train": train_keys(["acc"]),  # metrics=default's; train_keys gives another group's
    "eval": tuple(
        f"{s}/{m}" for s in EVAL_SPLITS for m in ("acc", "loss", "acc_per_class", *MULTI_LABEL_EVAL)
    ),
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
        *PIPELINE_KEYS,
    ),
    "inspect": ("inspect/warnings",),
    "validate": ("validate/samples", "validate/bad", "validate/bad_frac", "wall_s"),
    "cache": ("cache/images_per_s", "cache/images", "cache/written", "cache/mb", "wall_s"),
    "shards": ("shards/samples_per_s", "shards/samples", "shards/shards", "shards/mb", "wall_s"),
}


def metric_names(node: object) -> list[str]:
    """The metrics of a `metrics` group node (a mapping): its entries with a `_target_`; a
    plain key (metrics.threshold) is a setting they share, not a metric."""
    items = node.items() if hasattr(node, "items") else []  # type: ignore[union-attr]
    return [name for name, entry in items if hasattr(entry, "keys") and "_target_" in entry]
