"""Is it data or compute? The hint an epoch ends with when the model waited for its batches."""

from __future__ import annotations

import logging

from torch.utils.data import DataLoader

from engine.core.cpus import available_cpus

log = logging.getLogger(__name__)


def starvation_hint(wait_frac: float, threshold: float, loader: DataLoader) -> str | None:
    """Concrete next steps, in the order that usually pays most, when `wait_frac` > threshold."""
    if wait_frac <= threshold:
        return None
    cores = available_cpus()
    steps = []
    if loader.num_workers < cores:
        steps.append(
            f"raise loader.num_workers (now {loader.num_workers}) toward the {cores} "
            "usable cores, or set loader.num_workers=auto to measure"
        )
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
        f"starvation_threshold={threshold}): the loader is the bottleneck. Next steps: {numbered}."
    )


class StarvationHint:
    """Logs `starvation_hint` the first time an epoch's data wait passes `threshold`. Epoch 1
    (worker start-up) is judged only in a run of one epoch."""

    def __init__(self, threshold: float, max_epochs: int, loader: DataLoader) -> None:
        self.threshold, self.max_epochs, self.loader = threshold, max_epochs, loader
        self.given = False

    def check(self, epoch: int, wait_frac: float) -> None:
        """Judge `epoch`, whose train pass waited `wait_frac` of its time for data."""
        if self.given or (epoch == 1 and self.max_epochs > 1):
            return
        hint = starvation_hint(wait_frac, self.threshold, self.loader)
        if hint is not None:
            log.warning("epoch %d: %s", epoch, hint)
            self.given = True
