"""Is it data or compute? The hint an epoch ends with when the model waited for its batches:
with the pipeline's stage times (trainer.pipeline_timing), the stage that limits and what
lifts it (engine/training/limiting_stage.py); without them, the usual next steps."""

from __future__ import annotations

import logging

from torch.utils.data import DataLoader

from engine.core.cpus import available_cpus
from engine.training.limiting_stage import Limit, workers_fixes

log = logging.getLogger(__name__)


def starved(wait_frac: float, threshold: float, limit: Limit | None) -> bool:
    """Whether the model was kept from stepping more than `threshold` of the epoch: waiting
    for batches, or (when the copy limits) waiting and copying."""
    copying = limit is not None and limit.stage == "h2d"
    return max(wait_frac, limit.idle_frac if copying else 0.0) > threshold  # type: ignore[union-attr]


def limit_hint(limit: Limit, wait_frac: float, threshold: float) -> str:
    """The hint naming the limiting stage and, numbered, what would lift it."""
    numbered = "; ".join(f"{i}) {fix}" for i, fix in enumerate(limit.fixes, 1))
    idle = max(wait_frac, limit.idle_frac if limit.stage == "h2d" else 0.0)
    return (
        f"the model was kept waiting {100 * idle:.0f}% of the epoch (trainer.starvation_"
        f"threshold={threshold}), and {limit.stage} limits it: {limit.line}. To lift it: "
        f"{numbered}."
    )


def starvation_hint(
    wait_frac: float, threshold: float, loader: DataLoader, limit: Limit | None = None
) -> str | None:
    """The hint when the model was kept from stepping more than `threshold` of the epoch:
    `limit_hint` with stage times (`limit`), else concrete next steps, in the order that
    usually pays most (trainer.pipeline_timing=false); None when it was not."""
    if limit is not None:
        return (
            limit_hint(limit, wait_frac, threshold)
            if starved(wait_frac, threshold, limit)
            else None
        )
    if wait_frac <= threshold:
        return None
    steps = workers_fixes(loader, available_cpus())
    if loader.num_workers > 0 and not loader.persistent_workers:
        steps.append("set loader.persistent_workers=true (no worker restart every epoch)")
    if loader.num_workers > 0:
        steps.append(f"raise loader.prefetch_factor (now {loader.prefetch_factor}) to 4-8")
    steps.append(
        "store the images pre-resized near the training size (decode cost grows "
        "with pixels): make cache, then dataset=cache"
    )
    numbered = "; ".join(f"{i}) {step}" for i, step in enumerate(steps, 1))
    return (
        f"the model waited for data {100 * wait_frac:.0f}% of the epoch (trainer."
        f"starvation_threshold={threshold}): the loader is the bottleneck. Next steps: "
        f"{numbered}."
    )


class EpochHint:
    """The gate of an epoch's hints (this one, oversubscription.py's): at most once a run
    (`done`), and epoch 1 (worker start-up, the first steps) judged only from `first` = 1."""

    first, done = 2, False

    def due(self, epoch: int) -> bool:
        return not self.done and epoch >= self.first


class StarvationHint(EpochHint):
    """Logs `starvation_hint` the first time an epoch's data wait passes `threshold`. Epoch 1
    (worker start-up) is judged only in a run of one epoch."""

    def __init__(self, threshold: float, max_epochs: int, loader: DataLoader) -> None:
        self.threshold, self.loader = threshold, loader
        self.first = 1 if max_epochs == 1 else 2

    def check(self, epoch: int, wait_frac: float, limit: Limit | None = None) -> None:
        """Judge `epoch`, whose train pass waited `wait_frac` of its time for data and whose
        stage times name `limit` (None: no stage times)."""
        if not self.due(epoch):
            return
        hint = starvation_hint(wait_frac, self.threshold, self.loader, limit)
        if hint is not None:
            log.warning("epoch %d: %s", epoch, hint)
            self.done = True
