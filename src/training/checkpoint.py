"""Checkpoints written atomically and read back without running pickled code."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import torch

from src.utils.io import atomic_write_bytes


def save_checkpoint(path: str | Path, state: dict[str, Any]) -> None:
    """Serialise `state` (tensors, numbers, strings, containers) and replace `path` atomically."""
    buffer = io.BytesIO()
    torch.save(state, buffer)
    atomic_write_bytes(path, buffer.getvalue())


def load_checkpoint(path: str | Path) -> dict[str, Any]:
    """Load a checkpoint with `weights_only=True`: plain data only, no arbitrary objects."""
    return torch.load(path, map_location="cpu", weights_only=True)
