"""The per-sample pipeline and the batched path's plans on the same draws: what the batched
crops are compared against (engine/tests/test_batched_geometry.py, bench/batched_crops.py)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from torchvision.transforms import v2

from engine.data.batched_geometry import Geometry, Plan


def seeded_draws(
    steps: Sequence[Any], images: list[torch.Tensor], key: str = "transforms.val"
) -> tuple[Geometry, torch.Tensor, list[Plan]]:
    """(the geometry of `steps`, torchvision's pipeline of `steps` on each image, stacked, and
    each image's plan), image i drawn under seed i by both."""
    geometry, pipeline = Geometry.of(v2.Compose(list(steps)), key), v2.Compose(list(steps))
    expected, plans = [], []
    for seed, image in enumerate(images):
        torch.manual_seed(seed)
        expected.append(pipeline(image))
        torch.manual_seed(seed)
        plans.append(geometry.draw(*image.shape[-2:]))
    return geometry, torch.stack(expected), plans
