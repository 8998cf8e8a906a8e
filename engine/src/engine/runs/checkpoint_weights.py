"""Which weights of a training checkpoint a run on it uses (mode=eval, mode=predict,
load_model, `model.pretrained_file`): the ones its monitor measured. A training with
`trainer.ema.decay` saves both sets, `model` (the trained weights) and `ema` (their moving
average); a monitor on the EMA's scores (`val/ema_acc`) picked best.pt by the EMA, so the EMA's
weights are the ones that scored it."""

from __future__ import annotations

from typing import Any

from engine.metric_keys import EMA_PREFIX

EMA_KEY = "ema"  # a checkpoint's EMA: {"weights": state dict, "updates": optimizer steps}


def saved_monitor(state: dict[str, Any]) -> str | None:
    """The trainer.checkpoint.monitor that the checkpoint's run used (None: unknown)."""
    node: Any = state.get("config")
    for key in ("trainer", "checkpoint", "monitor"):
        node = node.get(key) if isinstance(node, dict) else None
    return node if isinstance(node, str) else None


def picked_weights(state: dict[str, Any]) -> tuple[Any, str]:
    """(the weights, "EMA" or "trained"): the EMA's where the run's monitor was one of its
    scores and the checkpoint holds them, else the trained ones."""
    monitor, ema = saved_monitor(state), state.get(EMA_KEY)
    if monitor is not None and monitor.startswith(EMA_PREFIX) and isinstance(ema, dict):
        return ema.get("weights"), "EMA"
    return state.get("model"), "trained"
