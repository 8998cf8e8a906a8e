"""Checkpoints: written atomically, the last N plus the best kept, read without running code."""

from __future__ import annotations

import io
import logging
import os
import pickle
import zipfile
from pathlib import Path
from typing import Any

import torch

from src.utils.io import atomic_write_bytes

log = logging.getLogger(__name__)


class CheckpointError(RuntimeError):
    """A checkpoint that cannot be used: missing, empty, truncated, corrupt or unsafe."""


def save_checkpoint(path: str | Path, state: dict[str, Any]) -> None:
    """Serialise `state` (tensors, numbers, strings, containers) and replace `path` atomically."""
    buffer = io.BytesIO()
    torch.save(state, buffer)
    atomic_write_bytes(path, buffer.getvalue())


def load_checkpoint(path: str | Path) -> dict[str, Any]:
    """Load with `weights_only=True`: tensors and plain data only; pickled code never runs."""
    path = Path(path)
    if not path.is_file():
        raise CheckpointError(f"{path}: no such checkpoint file.")
    if path.stat().st_size == 0:
        raise CheckpointError(f"{path} is empty (0 bytes): its write never happened.")
    try:
        return torch.load(path, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as err:
        first = str(err).strip().splitlines()[0]
        raise CheckpointError(
            f"{path} was refused: it holds objects other than tensors and plain data, which "
            f"weights_only=True does not load (nothing in it ran). {first}. Only load "
            "checkpoints you trust, and re-save them as plain state dicts."
        ) from err
    except (RuntimeError, EOFError, zipfile.BadZipFile, OSError) as err:
        raise CheckpointError(
            f"{path} is truncated or corrupt ({type(err).__name__}: {err}); it cannot be loaded."
        ) from err


def _link(target: Path, link: Path) -> None:
    """Point `link` at `target`'s content atomically (a hard link; a copy where links fail)."""
    tmp = link.with_name(f".{link.name}.tmp")
    tmp.unlink(missing_ok=True)
    try:
        os.link(target, tmp)
    except OSError:  # file systems without hard links: write a copy instead
        atomic_write_bytes(tmp, target.read_bytes())
    os.replace(tmp, link)


class Checkpoints:
    """`step########.pt` files in `directory`, the newest `keep_last` kept; `last.pt` and
    `best.pt` (by `monitor`, `mode` max|min) point at the latest and the best of them. With
    `write=False` (the other ranks of a distributed job) nothing is written, only `best` kept."""

    def __init__(
        self, directory: Path, keep_last: int, monitor: str, mode: str, write: bool = True
    ) -> None:
        self.directory, self.keep_last = directory, keep_last
        self.monitor, self.mode = monitor, mode
        self.write = write
        self.best: float | None = None

    def adopt_best(self, previous: Path) -> None:
        """Carry the best.pt of the run being resumed into this run's folder (until an epoch
        here does better), so every run folder has its best checkpoint."""
        if self.write and previous.is_file():
            self.directory.mkdir(parents=True, exist_ok=True)
            _link(previous, self.directory / "best.pt")

    def _improves(self, metrics: dict[str, float] | None) -> bool:
        if metrics is None:
            return False
        if self.monitor not in metrics:
            raise KeyError(
                f"trainer.checkpoint.monitor={self.monitor!r} is not a metric of this run; "
                f"use one of {sorted(metrics)}."
            )
        value = metrics[self.monitor]
        if self.best is None:
            better = True
        else:
            better = value > self.best if self.mode == "max" else value < self.best
        if better:
            self.best = value
        return better

    def save(self, state: dict[str, Any], metrics: dict[str, float] | None = None) -> Path:
        """Write `state` as the checkpoint of its step; `metrics` (epoch ends) may make it best."""
        improved = self._improves(metrics)
        path = self.directory / f"step{state['step']:08d}.pt"
        if not self.write:
            return path
        save_checkpoint(path, state | {"best": self.best})
        _link(path, self.directory / "last.pt")
        if improved:
            _link(path, self.directory / "best.pt")
        for old in self.history()[: -self.keep_last]:
            old.unlink()
        return path

    def history(self) -> list[Path]:
        """The step checkpoints on disk, oldest first."""
        return sorted(self.directory.glob("step*.pt"))


def load_newest(directory: Path) -> tuple[Path, dict[str, Any]] | None:
    """The newest loadable step checkpoint in `directory`; unusable ones are reported and the
    one before them is tried. None when there is none."""
    for path in reversed(sorted(directory.glob("step*.pt"))):
        try:
            return path, load_checkpoint(path)
        except CheckpointError as err:
            log.warning("skipping checkpoint: %s Trying the previous one.", err)
    return None
