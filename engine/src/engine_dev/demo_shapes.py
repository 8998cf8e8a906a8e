"""The demo's shape geometry, shared by the single-label (demo.py) and multi-label
(demo_multilabel.py) sets: both draw the same five shapes the same way."""

from __future__ import annotations

import math

import numpy as np
from PIL import ImageDraw

CLASSES: tuple[str, ...] = ("circle", "cross", "square", "star", "triangle")
# Shapes the demo set never holds, drawn the same way: a task of new classes for transfer
# (docs/finetune_demo.py fine-tunes a model pretrained on CLASSES on a few of them).
NEW_CLASSES: tuple[str, ...] = ("arrow", "hexagon")


def rotation(theta: float) -> np.ndarray:
    """The 2 x 2 matrix rotating by `theta` radians."""
    return np.array([[math.cos(theta), -math.sin(theta)], [math.sin(theta), math.cos(theta)]])


def polygon(name: str, r: float, rng: np.random.Generator) -> np.ndarray:
    """Vertices (k, 2) of an upright `name` centred at 0 that fits in a circle of radius `r`."""
    if name == "cross":
        a = r * rng.uniform(0.22, 0.34)  # half arm width
        b = math.sqrt(r * r - a * a)  # arm length that puts the arm corners on the circle
        arm = np.array([(b, -a), (b, a), (a, a)])
        return np.concatenate([arm @ rotation(k * math.pi / 2).T for k in range(4)])
    if name == "arrow":  # a head of half the length on a shaft
        a, head = r * rng.uniform(0.15, 0.25), r * rng.uniform(0.45, 0.6)
        return np.array([(-r, -a), (0, -a), (0, -head), (r, 0), (0, head), (0, a), (-r, a)])
    if name == "star":
        radii = np.tile([r, r * rng.uniform(0.38, 0.5)], 5)
    elif name == "hexagon":
        radii = np.full(6, r)
    else:
        radii = np.full({"square": 4, "triangle": 3}[name], r)
    angles = np.arange(len(radii)) * 2 * math.pi / len(radii)
    return np.stack([np.cos(angles), np.sin(angles)], axis=1) * radii[:, None]


def draw_shape(
    draw: ImageDraw.ImageDraw,
    name: str,
    centre: np.ndarray,
    r: float,
    rng: np.random.Generator,
    scale: int,
    max_turn: float = 2 * math.pi,
) -> None:
    """Fill `name` of radius `r` at `centre`, turned by a random angle below `max_turn`
    radians, into a mask `scale` x larger."""
    if name == "circle":
        draw.ellipse(list(np.concatenate([centre - r, centre + r]) * scale), fill=255)
    else:
        verts = polygon(name, r, rng) @ rotation(rng.uniform(0, max_turn)).T + centre
        draw.polygon([tuple(v) for v in verts * scale], fill=255)
