"""The final metrics of a run (metrics.json), from the per-epoch history."""

from __future__ import annotations

from collections.abc import Iterable

from engine.metric_keys import EMA_PREFIX, PIPELINE_KEYS

# The per-epoch curves, besides each metric's val/<name>, whose last points sum a training up in
# TensorBoard's HParams tab (train/epoch_loss is metrics.json's train/loss: the last epoch's mean)
BOARD_TAGS = ("val/loss", "train/epoch_loss", "train/samples_per_s")


def board_tags(metrics: dict[str, float]) -> list[str]:
    """The HParams columns of a run's final `metrics`: val/<name> of each metric, BOARD_TAGS."""
    best = {k.replace("/best_", "/", 1) for k in metrics if k.startswith("val/best_")}
    return [*sorted(best), *BOARD_TAGS]


def summarize(
    history: list[dict[str, float]], metrics: Iterable[str], wall_s: float
) -> dict[str, float]:
    """Last-epoch losses and metrics, each metric's best val/<name> (val/best_<name>), and
    throughput over all epochs; `metrics`: the names of the metrics group's metrics.

    Throughput and data-wait are totals over every epoch (time-weighted), so worker
    start-up in epoch 1 counts against them as it does against the user's wall clock.
    A mix's last-epoch val/<source>/* metrics come along, and with trainer.pipeline_timing
    each pipeline/<stage>_ms over every epoch, weighted by the epoch's samples.
    """
    last = history[-1]
    train_s = sum(h["train/epoch_s"] for h in history)
    per_source = {k: v for k, v in last.items() if k.startswith("val/") and k.count("/") == 2}
    measured: dict[str, float] = {}
    for name in metrics:
        measured[f"val/{name}"] = last[f"val/{name}"]
        measured[f"val/best_{name}"] = max(h[f"val/{name}"] for h in history)
        if f"{EMA_PREFIX}{name}" in last:  # trainer.ema.decay: the moving average's too
            measured[f"{EMA_PREFIX}{name}"] = last[f"{EMA_PREFIX}{name}"]
            measured[f"val/best_ema_{name}"] = max(h[f"{EMA_PREFIX}{name}"] for h in history)
    if f"{EMA_PREFIX}loss" in last:
        measured[f"{EMA_PREFIX}loss"] = last[f"{EMA_PREFIX}loss"]
    samples = sum(h["train/samples"] for h in history)
    stages = {
        key: sum(h[key] * h["train/samples"] for h in history) / samples
        for key in PIPELINE_KEYS
        if samples and all(key in h for h in history)
    }
    return (
        per_source
        | measured
        | {
            "val/loss": last["val/loss"],
            "train/loss": last["train/loss"],
            "train/samples_per_s": sum(h["train/samples"] for h in history) / train_s,
            "train/data_wait_frac": sum(
                h["train/data_wait_frac"] * h["train/epoch_s"] for h in history
            )
            / train_s,
            "train/first_batch_s": history[0]["train/first_batch_s"],
            "epochs": len(history),
            "wall_s": wall_s,
        }
        | ({"val/samples": last["val/samples"]} if "val/samples" in last else {})
        | stages
    )
