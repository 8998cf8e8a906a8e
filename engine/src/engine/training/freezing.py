"""`trainer.freeze_epochs`: the first N epochs train the head alone over a frozen pretrained
backbone, then everything trains (the classic two-stage fine-tune: a freshly initialised head
would otherwise send large gradients through the pretrained layers).

Frozen weights get no gradient (requires_grad off), so the optimizer leaves them as they are,
weight decay and momentum included, and the backward pass skips them. Their BatchNorm layers
are in eval mode while frozen (`trainer.freeze_bn_stats`, default true): their running
statistics stay the pretrained ones, as Keras' fine-tuning guide keeps them. Which weights
train is a function of the epoch alone, so a resume anywhere is exact. Under torchrun the
DDP wrapper is built with find_unused_parameters (engine.training.distributed.wrap_model):
its reducer otherwise waits for the frozen weights' gradients.
"""

from __future__ import annotations

import logging

from torch import nn
from torch.nn.modules.batchnorm import _BatchNorm

from engine.training.head import head_modules

log = logging.getLogger(__name__)


class Freezer:
    """Freezes the bare `model` but its head (the classifier of `num_classes` outputs) for
    epochs 1..`epochs`; `keep_bn_stats`: the frozen BatchNorm layers in eval mode."""

    def __init__(self, model: nn.Module, num_classes: int, epochs: int, keep_bn_stats: bool):
        heads = head_modules(model, num_classes)
        if not heads:
            raise ValueError(
                f"trainer.freeze_epochs={epochs} trains the head alone, but this model has no "
                f"layer with {num_classes} outputs (one per class) to be its head: set "
                "trainer.freeze_epochs=0, or give the model a Linear classifier."
            )
        self.head_name = ", ".join(name for name, _ in heads)
        self.epochs, self.keep_bn_stats = epochs, keep_bn_stats
        inside = {id(p) for _, head in heads for p in head.parameters()}
        self.frozen = [p for p in model.parameters() if id(p) not in inside]
        owned = {id(m) for _, head in heads for m in head.modules()}
        self.norms = [
            m for m in model.modules() if isinstance(m, _BatchNorm) and id(m) not in owned
        ]
        self._said: bool | None = None

    def apply(self, epoch: int) -> bool:
        """Set the weights that train in `epoch` (after model.train(): it sets the modes);
        whether that changed which train (the run's first epoch included)."""
        frozen = epoch <= self.epochs
        for parameter in self.frozen:
            parameter.requires_grad_(not frozen)
        if frozen and self.keep_bn_stats:
            for norm in self.norms:
                norm.eval()
        changed = self._said != frozen
        if changed:
            self._said = frozen
            if frozen:
                log.info(
                    "epochs 1-%d: the head (%s) trains alone, %d weight tensors of the backbone "
                    "frozen%s (trainer.freeze_epochs); from epoch %d everything trains",
                    self.epochs,
                    self.head_name,
                    len(self.frozen),
                    ", its BatchNorm statistics kept" if self.keep_bn_stats else "",
                    self.epochs + 1,
                )
            elif epoch > 1:
                log.info("epoch %d: the backbone is unfrozen, everything trains", epoch)
        return changed
