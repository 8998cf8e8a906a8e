"""The `trainer` config group as a validated settings object."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class CheckpointSettings:
    """`trainer.checkpoint`: when checkpoints are written and which are kept."""

    keep_last: int
    monitor: str
    mode: str
    every_n_steps: int
    every_minutes: float

    def __post_init__(self) -> None:
        for key in ("every_n_steps", "every_minutes"):
            if getattr(self, key) < 0:
                raise ValueError(f"trainer.checkpoint.{key} must be >= 0 (0 = off), "
                                 f"got {getattr(self, key)}.")  # fmt: skip


@dataclass(frozen=True)
class TrainerSettings:
    """The `trainer` config group (see conf/trainer/default.yaml)."""

    max_epochs: int
    seed: int
    device: str
    precision: str
    grad_accum: int
    log_every_n_steps: int
    limit_train_batches: int | None
    limit_val_batches: int | None
    channels_last: bool
    profile: bool
    starvation_threshold: float
    checkpoint: CheckpointSettings
    resume: str | None
    max_nonfinite_steps: int

    def __post_init__(self) -> None:
        if self.max_nonfinite_steps < 0:
            raise ValueError(f"trainer.max_nonfinite_steps must be >= 0, got "
                             f"{self.max_nonfinite_steps}.")  # fmt: skip
        for key in ("max_epochs", "grad_accum", "log_every_n_steps"):
            if getattr(self, key) < 1:
                raise ValueError(f"trainer.{key} must be >= 1, got {getattr(self, key)}.")
        for key in ("limit_train_batches", "limit_val_batches"):
            if getattr(self, key) is not None and getattr(self, key) < 1:
                raise ValueError(f"trainer.{key} must be >= 1 or null, got {getattr(self, key)}.")
