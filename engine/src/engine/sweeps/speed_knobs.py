"""A training sweep over speed knobs only ranks by speed.

The engine gives a training the same samples, order and augmentations whatever the loader's
workers (engine/data/seeded.py), so jobs that differ only in the knobs below learn the
same model: their val/acc differs by float rounding alone (the threads left to the step change
with the workers). Ranking them by it would recommend noise; their real difference is speed.
batch_size, shuffle, drop_last and collate_fn change what is learned and are not speed knobs.
"""

from __future__ import annotations

from engine.sweeps.plot import swept_keys

SPEED_KNOBS = frozenset(
    f"loader.{knob}"
    for knob in (
        "num_workers",
        "pin_memory",
        "prefetch_factor",
        "persistent_workers",
        "timeout",
        "multiprocessing_context",
        "sharing_strategy",
    )
)
SPEED_METRIC = "train/samples_per_s"


def speed_only(rows: list[dict[str, str]]) -> list[str]:
    """The keys the jobs of `rows` vary, when each is a speed knob; [] when any is not (or
    nothing varies yet)."""
    keys = swept_keys(rows)
    return keys if keys and SPEED_KNOBS.issuperset(keys) else []
