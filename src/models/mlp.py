"""A multi-layer perceptron for feature vectors (any input is flattened)."""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
from torch import nn

from engine.api import Positive, Share


class MLP(nn.Module):
    """Flatten -> [Linear -> ReLU -> Dropout] per hidden width -> Linear."""

    def __init__(
        self,
        num_classes: int,
        input_shape: Sequence[int],
        hidden: Sequence[Positive],
        dropout: Share,
    ) -> None:
        super().__init__()
        layers: list[nn.Module] = [nn.Flatten()]
        width = math.prod(input_shape)
        for h in hidden:
            layers += [nn.Linear(width, h), nn.ReLU(inplace=True), nn.Dropout(dropout)]
            width = h
        layers.append(nn.Linear(width, num_classes))
        self.net = nn.Sequential(*layers)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)
