"""`batch_transforms=mixup_cutmix`: MixUp or CutMix on each train batch, on the device after
normalisation, by torchvision's own `transforms.v2.MixUp` and `CutMix` (one of the two per
batch, as torchvision's classification reference and timm's `Mixup` choose).

The labels become soft targets, each row summing to 1, which the loss takes as class
probabilities (`CrossEntropyLoss` does, label smoothing and class weights included); train
accuracy is counted against their argmax, the class that holds most of the mix. A batch left
unmixed (`prob`, or from `off_epoch` on) keeps its class indices. The draws come from torch's
global generator in the main process, which every checkpoint saves and a resume restores, so
a resumed run mixes as the uninterrupted one did. Single-label data only: a mix of two
multi-label images is no one's label set.
"""

from __future__ import annotations

import torch
from torch import nn
from torchvision.transforms import v2

from engine.core.bounds import Fraction, Positive
from engine.training.batches import DeviceBatch


class MixUpCutMix:
    """MixUp (Beta(`mixup_alpha`) weights; 0: off) or CutMix (Beta(`cutmix_alpha`) boxes; 0:
    off) on a batch with probability `prob`, CutMix chosen with probability `switch_prob`
    when both are on, until epoch `off_epoch` (None: every epoch), for `num_classes`."""

    def __init__(
        self,
        num_classes: Positive,
        mixup_alpha: float = 0.2,
        cutmix_alpha: float = 1.0,
        prob: Fraction = 1.0,
        switch_prob: Fraction = 0.5,
        off_epoch: Positive | None = None,
    ) -> None:
        if mixup_alpha < 0 or cutmix_alpha < 0 or mixup_alpha + cutmix_alpha == 0:
            raise ValueError(
                f"batch_transforms.mixup_alpha={mixup_alpha}, cutmix_alpha={cutmix_alpha}: each "
                "must be >= 0 and one > 0 (0 turns that one off); or batch_transforms=null."
            )
        self.num_classes, self.prob, self.off_epoch = num_classes, prob, off_epoch
        self.switch_prob = switch_prob if mixup_alpha and cutmix_alpha else float(cutmix_alpha > 0)
        self.mixup = v2.MixUp(alpha=mixup_alpha, num_classes=num_classes) if mixup_alpha else None
        self.cutmix = (
            v2.CutMix(alpha=cutmix_alpha, num_classes=num_classes) if cutmix_alpha else None
        )

    def __call__(self, batch: DeviceBatch, epoch: int) -> DeviceBatch:
        """`batch` mixed (its labels soft), or as it is: off in `epoch`, or not drawn."""
        if self.off_epoch is not None and epoch >= self.off_epoch:
            return batch
        if float(torch.rand(())) >= self.prob:
            return batch
        use_cutmix = float(torch.rand(())) < self.switch_prob
        transform: nn.Module = self.cutmix if use_cutmix else self.mixup  # type: ignore[assignment]
        inputs, labels = transform(batch.inputs, batch.labels)
        mixed = DeviceBatch(inputs, labels, batch.extras)
        mixed.ids = batch.ids
        return mixed


def hard_labels(labels: torch.Tensor, multi_label: bool) -> torch.Tensor:
    """Class indices from `labels`: soft targets (a mixed batch of single-label data) by their
    argmax, anything else as it is."""
    if not multi_label and labels.is_floating_point() and labels.ndim == 2:
        return labels.argmax(dim=1)
    return labels
