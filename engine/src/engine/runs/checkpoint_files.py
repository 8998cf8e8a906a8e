"""Checkpoints: written atomically, the last N plus the best kept, read without running code."""

from __future__ import annotations

import io
import logging
import os
import pickle
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from hydra.errors import CompactHydraException

from engine.core.io import atomic_write_bytes

log = logging.getLogger(__name__)


class CheckpointError(RuntimeError, CompactHydraException):
    """A checkpoint that cannot be used: missing, empty, truncated, corrupt, unsafe, or not a
    checkpoint of this model. Hydra prints its message alone: one line naming the file."""


def save_checkpoint(path: str | Path, state: dict[str, Any]) -> None:
    """Serialise `state` (tensors, numbers, strings, containers) and replace `path` atomically."""
    buffer = io.BytesIO()
    torch.save(state, buffer)
    atomic_write_bytes(path, buffer.getvalue())


def load_checkpoint(path: str | Path, mmap: bool = False) -> dict[str, Any]:
    """Load with `weights_only=True`: tensors and plain data only; pickled code never runs.
    `mmap=True` maps the tensors instead of reading them: a cheap look at what a file holds.
    Anything but a dict (what every checkpoint is) is a CheckpointError naming the file."""
    path = Path(path)
    if not path.is_file():
        raise CheckpointError(f"{path}: no such checkpoint file.")
    if path.stat().st_size == 0:
        raise CheckpointError(f"{path} is empty (0 bytes): its write never happened.")
    _check_members(path)
    try:
        mmap = mmap and zipfile.is_zipfile(path)  # only torch.save's zip format maps
        state = torch.load(path, map_location="cpu", weights_only=True, mmap=mmap)
    except pickle.UnpicklingError as err:
        first = str(err).strip().splitlines()[0]
        raise CheckpointError(
            f"{path} was refused: it holds objects other than tensors and plain data, which "
            f"weights_only=True does not load (nothing in it ran). {first}. Only load "
            "checkpoints you trust, and re-save them as plain state dicts."
        ) from err
    except Exception as err:  # torch's reader fails in many ways on damaged bytes
        first = (str(err).strip().splitlines() or [""])[0][:300]
        raise CheckpointError(
            f"{path} is truncated or corrupt ({type(err).__name__}: {first}); it cannot be loaded."
        ) from err
    if not isinstance(state, dict):
        raise CheckpointError(
            f"{path} holds a {type(state).__name__}, not a checkpoint (a dict of the training "
            "state): it was not written by this project's train.py."
        )
    return state


def _check_members(path: Path) -> None:
    """torch.save stores its zip members uncompressed: a compressed one (which torch.load
    would inflate before any check: a 6 MB file can ask for gigabytes) or members larger in
    all than the file is refused."""
    if not zipfile.is_zipfile(path):
        return  # the legacy format, or not a checkpoint: torch.load says which
    try:
        with zipfile.ZipFile(path) as archive:
            members = archive.infolist()
    except (zipfile.BadZipFile, OSError, ValueError) as err:
        raise CheckpointError(
            f"{path} is truncated or corrupt ({err}); it cannot be loaded."
        ) from None
    packed = [m.filename for m in members if m.compress_type != zipfile.ZIP_STORED]
    if packed or sum(m.file_size for m in members) > path.stat().st_size:
        raise CheckpointError(
            f"{path} holds compressed members ({(packed or ['sizes beyond the file'])[0]}), "
            "which torch.save never writes: it was not written by train.py."
        )


def _link(target: Path, link: Path) -> None:
    """Point `link` at `target`'s content atomically (a hard link; a copy where links fail)."""
    tmp = link.with_name(f".{link.name}.tmp")
    tmp.unlink(missing_ok=True)
    try:
        os.link(target, tmp)
    except OSError:  # file systems without hard links: write a copy instead
        atomic_write_bytes(tmp, target.read_bytes())
    os.replace(tmp, link)


def _set_aside(path: Path) -> Path:
    """Rename `path` to a free `<name>.set-aside[.N]` beside it (no longer a step*.pt)."""
    for n in range(1000):
        aside = path.with_name(f"{path.name}.set-aside" + (f".{n}" if n else ""))
        if not aside.exists():
            os.replace(path, aside)
            return aside
    raise FileExistsError(f"{path}: too many set-aside copies beside it; clean them up.")


class Checkpoints:
    """`step########.pt` files in `directory`, the newest `keep_last` kept; `last.pt` and
    `best.pt` (by `monitor`, `mode` max|min) point at the latest and the best of them. With
    `write=False` (the other ranks of a distributed job) nothing is written, only `best` kept.

    Which step files a run may remove (keep_last pruning) or replace: only its own, i.e. the
    ones this object wrote and the ones `adopt`ed at the start (the checkpoints of the same
    config, in this folder, that the run resumed through: steps up to the one resumed from).
    Of those, the newest `keep_last` by step stay. Any other step file in the folder (another
    config's, an unreadable one, a later step of an earlier run that this run did not
    continue) is neither removed nor counted, so a stale step00000040.pt can never push the
    fresh steps of a run at step 8 out. Should this run reach the step of such a file, that
    file is renamed to `<name>.set-aside` (kept, with a warning) rather than overwritten. A
    run may not start in a folder holding step files it does not continue at all (e.g. a
    fresh run where another config's step00000040.pt lies): `run_dir.claim_run_dir` refuses
    that before anything is written."""

    def __init__(
        self, directory: Path, keep_last: int, monitor: str, mode: str, write: bool = True
    ) -> None:
        self.directory, self.keep_last = directory, keep_last
        self.monitor, self.mode = monitor, mode
        self.write = write
        self.best: float | None = None
        self._own: set[str] = set()  # names of the step files this run may prune or replace

    def adopt(self, paths: list[Path]) -> None:
        """Make step files of this folder this run's own (pruned like the ones it writes)."""
        self._own.update(p.name for p in paths if p.parent == self.directory)

    def adopt_best(self, previous: Path) -> None:
        """Carry the best.pt of the run being resumed into this run's folder (until an epoch
        here does better), so every run folder has its best checkpoint."""
        if self.write and previous.is_file() and previous != self.directory / "best.pt":
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
        if path.name not in self._own and path.exists():
            aside = _set_aside(path)
            log.warning(
                "%s was not written by this run (another config's or unusable): kept "
                "as %s; this run writes its own step %d there",
                path,
                aside.name,
                state["step"],
            )
        save_checkpoint(path, state | {"best": self.best})
        self._own.add(path.name)
        _link(path, self.directory / "last.pt")
        if improved:
            _link(path, self.directory / "best.pt")
        own = sorted(self._own)  # step########.pt: name order is step order
        for name in own[: -self.keep_last]:
            (self.directory / name).unlink(missing_ok=True)
            self._own.discard(name)
        return path

    def history(self) -> list[Path]:
        """The step checkpoints on disk, oldest first."""
        return sorted(self.directory.glob("step*.pt"))


Check = Callable[[dict[str, Any]], "str | None"]


def load_newest(
    directory: Path, problem: Check | None = None
) -> tuple[Path, dict[str, Any]] | None:
    """The newest loadable step checkpoint in `directory` for which `problem(state)` is None
    (no problem); each unusable one is reported in one warning line naming the file, and the
    one before it is tried. None when there is none."""
    for path in reversed(sorted(directory.glob("step*.pt"))):
        try:
            state = load_checkpoint(path)
        except CheckpointError as err:
            log.warning("skipping checkpoint: %s Trying the previous one.", err)
            continue
        why = problem(state) if problem is not None else None
        if why is None:
            return path, state
        log.warning("skipping checkpoint: %s %s. Trying the previous one.", path, why)
    return None
