"""The final metrics of a run (metrics.json), from the per-epoch history."""

from __future__ import annotations

# The per-epoch curves whose last points sum a training up in TensorBoard's HParams tab
# (train/epoch_loss is metrics.json's train/loss: the last epoch's mean)
BOARD_TAGS = ("val/acc", "val/loss", "train/epoch_loss", "train/samples_per_s")


def summarize(history: list[dict[str, float]], wall_s: float) -> dict[str, float]:
    """Last-epoch losses and accuracy, best val/acc, and throughput over all epochs.

    Throughput and data-wait are totals over every epoch (time-weighted), so worker
    start-up in epoch 1 counts against them as it does against the user's wall clock.
    A mix's last-epoch val/<source>/* metrics come along.
    """
    last = history[-1]
    train_s = sum(h["train/epoch_s"] for h in history)
    per_source = {k: v for k, v in last.items() if k.startswith("val/") and k.count("/") == 2}
    return per_source | {
        "val/acc": last["val/acc"],
        "val/loss": last["val/loss"],
        "val/best_acc": max(h["val/acc"] for h in history),
        "train/loss": last["train/loss"],
        "train/samples_per_s": sum(h["train/samples"] for h in history) / train_s,
        "train/data_wait_frac": sum(h["train/data_wait_frac"] * h["train/epoch_s"] for h in history)
        / train_s,
        "train/first_batch_s": history[0]["train/first_batch_s"],
        "epochs": len(history),
        "wall_s": wall_s,
    }
