"""The `trainer` config group as a validated settings object."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Annotated

import torch

from engine.core.bounds import Bound, Count, Fraction, Positive, Seconds, Seed
from engine.metric_keys import lower_is_better
from engine.training.device import PRECISIONS


@dataclass(frozen=True)
class CheckpointSettings:
    """`trainer.checkpoint`: when checkpoints are written and which are kept. A null
    `monitor` or `mode` is decided by `resolve_monitor` once the metrics are known."""

    keep_last: int
    monitor: str | None
    mode: str | None
    every_n_steps: int
    every_minutes: float

    def __post_init__(self) -> None:
        if self.keep_last < 1:
            raise ValueError(f"trainer.checkpoint.keep_last={self.keep_last}: expected int >= 1.")
        if self.mode not in ("max", "min", None):
            raise ValueError(
                f"trainer.checkpoint.mode={self.mode!r}: expected max or min (or null: min "
                "for a loss, max for a metric)."
            )
        for key in ("every_n_steps", "every_minutes"):
            if getattr(self, key) < 0:
                raise ValueError(
                    f"trainer.checkpoint.{key} must be >= 0 (0 = off), got {getattr(self, key)}."
                )


@dataclass(frozen=True)
class EarlyStoppingSettings:
    """`trainer.early_stopping`: stop once trainer.checkpoint.monitor stops improving."""

    patience: int

    def __post_init__(self) -> None:
        if self.patience < 0:
            raise ValueError(
                f"trainer.early_stopping.patience={self.patience}: expected an int >= 0 "
                "(epochs without improvement before stopping; 0 = off)."
            )


@dataclass(frozen=True)
class EmaSettings:
    """`trainer.ema`: an exponential moving average of the weights (engine/training/ema.py)."""

    decay: Annotated[float, Bound(0, 1, open_least=True, open_most=True)] | None = None


# torch.compile's modes (trainer.compile); "default" is its mode=None
COMPILE_MODES = ("default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs")

# trainer.resume_granularity: a mid-epoch resume whose global batch differs goes on at the
# step (refused: the steps would hold other samples) or at the sample (the boundaries move)
GRANULARITIES = ("step", "sample")


@dataclass(frozen=True)
class TrainerSettings:
    """The `trainer` config group (see conf/trainer/default.yaml)."""

    max_epochs: int
    seed: Seed
    device: str
    precision: str
    grad_accum: Positive
    log_every_n_steps: int
    limit_train_batches: int | None
    limit_val_batches: int | None
    channels_last: bool
    device_prefetch: bool
    profile: bool
    starvation_threshold: Fraction
    checkpoint: CheckpointSettings
    resume: str | None
    max_nonfinite_steps: int
    early_stopping: EarlyStoppingSettings
    num_threads: Positive | None = None
    log_every_n_seconds: Seconds = 30.0
    record_samples: bool = False
    resume_granularity: str = "step"
    pipeline_timing: bool | None = None  # null: on, but off for a dataset in memory (assemble)
    freeze_epochs: Count = 0
    freeze_bn_stats: bool = True
    clip_grad_norm: Annotated[float, Bound(0, open_least=True)] | None = None
    compile: str | None = None
    ema: EmaSettings = EmaSettings()

    def __post_init__(self) -> None:
        if self.compile is not None and self.compile not in COMPILE_MODES:
            raise ValueError(
                f"trainer.compile={self.compile!r}: expected null (off) or one of "
                f"{list(COMPILE_MODES)} (torch.compile's modes)."
            )
        if str(self.precision) not in PRECISIONS:
            raise ValueError(
                f"trainer.precision={self.precision!r}: expected one of {list(PRECISIONS)}."
            )
        if self.device != "auto":
            try:
                torch.device(self.device)
            except RuntimeError:
                raise ValueError(
                    f"trainer.device={self.device!r}: expected auto, cpu, cuda, cuda:N or mps."
                ) from None
        if self.resume_granularity not in GRANULARITIES:
            raise ValueError(
                f"trainer.resume_granularity={self.resume_granularity!r}: expected one of "
                f"{list(GRANULARITIES)}."
            )
        if self.max_nonfinite_steps < 0:
            raise ValueError(
                f"trainer.max_nonfinite_steps must be >= 0, got {self.max_nonfinite_steps}."
            )
        for key in ("max_epochs", "grad_accum", "log_every_n_steps"):
            if getattr(self, key) < 1:
                raise ValueError(f"trainer.{key} must be >= 1, got {getattr(self, key)}.")
        for key in ("limit_train_batches", "limit_val_batches"):
            if getattr(self, key) is not None and getattr(self, key) < 1:
                raise ValueError(f"trainer.{key} must be >= 1 or null, got {getattr(self, key)}.")


def resolve_monitor(settings: TrainerSettings, metric_names: Sequence[str]) -> TrainerSettings:
    """`settings` with trainer.checkpoint.monitor and mode decided, here only, so that best.pt,
    early stopping, the saved config and the log agree. A null monitor is the metrics group's
    first metric on the val split (`val/<name>`; `val/loss` for a group without metrics), so
    choosing the metrics group chooses what is monitored. A null mode is min for a loss
    (val/ema_loss too: engine.metric_keys.lower_is_better) and max otherwise: metrics carry no
    direction and are better higher (val/best_<name> is the highest, a sweep ranks them
    highest first). A value set by hand is kept as it is."""
    every = settings.checkpoint
    monitor = every.monitor
    if monitor is None:
        monitor = f"val/{metric_names[0]}" if metric_names else "val/loss"
    mode = every.mode
    if mode is None:
        mode = "min" if lower_is_better(monitor) else "max"
    return replace(settings, checkpoint=replace(every, monitor=monitor, mode=mode))
