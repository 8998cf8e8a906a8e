"""The metric keys each mode returns (its metrics.json, a sweep summary's columns), written
once. The first key of a mode ranks its sweep jobs when summary.rank_by is null.

A leaf: it imports nothing, so the config checks and the sweep callback read it without
importing the modes themselves.
"""

EVAL_SPLITS = ("val", "test")  # the labelled splits mode=eval measures (eval.split)
MULTI_LABEL_EVAL = ("map", "f1", "subset_acc")  # what mode=eval adds for a multi-label model

METRICS_BY_MODE: dict[str, tuple[str, ...]] = {
    "train": (
        "val/acc",
        "val/loss",
        "val/best_acc",
        "train/loss",
        "train/samples_per_s",
        "train/data_wait_frac",
        "train/first_batch_s",
        "epochs",
        "wall_s",
    ),
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
    ),
    "inspect": ("inspect/warnings",),
    "validate": ("validate/samples", "validate/bad", "validate/bad_frac", "wall_s"),
    "cache": ("cache/images_per_s", "cache/images", "cache/written", "cache/mb", "wall_s"),
    "shards": ("shards/samples_per_s", "shards/samples", "shards/shards", "shards/mb", "wall_s"),
}
