"""A small CNN for small images: fast on a CPU, any input size."""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn

from engine.api import Positive, Share


def _block(c_in: int, c_out: int) -> nn.Sequential:
    return nn.Sequential(
        nn.Conv2d(c_in, c_out, kernel_size=3, padding=1, bias=False),
        nn.BatchNorm2d(c_out),
        nn.ReLU(inplace=True),
    )


POOLS = {"max": nn.AdaptiveMaxPool2d, "avg": nn.AdaptiveAvgPool2d}


class SmallCNN(nn.Module):
    """Stages of conv-BN-ReLU x2 + max-pool, then global pooling and a linear head.

    Global max pooling answers "is the pattern anywhere?", which learns object-in-clutter
    tasks (like the demo shapes) in far fewer epochs than average pooling.
    """

    def __init__(
        self,
        num_classes: int,
        input_shape: Sequence[int],
        widths: Sequence[Positive],
        global_pool: str,
        dropout: Share,
    ) -> None:
        super().__init__()
        if len(input_shape) != 3:
            raise ValueError(
                f"model=small_cnn needs images (C, H, W), got input shape {tuple(input_shape)}; "
                "use model=mlp for feature vectors."
            )
        layers: list[nn.Module] = []
        c_in = input_shape[0]
        for width in widths:
            layers += [_block(c_in, width), _block(width, width), nn.MaxPool2d(2)]
            c_in = width
        if global_pool not in POOLS:
            raise ValueError(f"model.global_pool={global_pool!r}; expected one of {list(POOLS)}.")
        self.features = nn.Sequential(*layers)
        self.head = nn.Sequential(
            POOLS[global_pool](1), nn.Flatten(), nn.Dropout(dropout), nn.Linear(c_in, num_classes)
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.features(x))
