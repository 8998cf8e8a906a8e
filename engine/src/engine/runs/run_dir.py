"""Whether a run may write its checkpoints into its run dir: a folder without checkpoints, or
the one it resumed from; never another run's (nothing is mixed, pruned or overwritten)."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from hydra.errors import CompactHydraException

from engine.runs.checkpoint_checks import problem_with
from engine.runs.checkpoint_files import CheckpointError, Checkpoints, load_checkpoint

log = logging.getLogger(__name__)


class ResumeError(CompactHydraException):
    """This run cannot start where it was asked to: one line naming the folder and the fix."""


def _describe(path: Path, key: str) -> str:
    """Whose checkpoint `path` is, in a few words, read cheaply (tensors mapped, not read)."""
    try:
        state = load_checkpoint(path, mmap=True)
    except CheckpointError:
        return f"{path.name}, unreadable"
    theirs = state.get("config_key")
    if theirs == key:
        return f"{path.name}, of this config" + (", malformed" if problem_with(state) else "")
    return f"{path.name}, of another config (config_key {theirs or 'missing'})"


def claim_run_dir(
    run_dir: Path,
    resume: str | None,
    resumed: tuple[Path, dict[str, Any]] | None,
    key: str,
    checkpoints: Checkpoints,
) -> None:
    """Make sure this run may write checkpoints in `run_dir`/checkpoints, and hand the ones it
    continues to `checkpoints` (pruned like its own). Allowed: a folder without checkpoints
    (step*.pt, last.pt, best.pt), or the folder the run resumed from (`resumed`: path and
    state). Then its complete checkpoints of this config up to the step resumed from are
    adopted; the rest (another config's, unreadable, later steps this run did not continue)
    are left alone (see `Checkpoints`).
    Anything else, e.g. a fresh run (trainer.resume=null) in a folder of another run, is
    refused with one line naming the folder and the fix, before anything is written: a run's
    checkpoints are never mixed with, nor pruned in favour of, another run's."""
    folder = run_dir / "checkpoints"
    steps = sorted(folder.glob("step*.pt"))
    links = [folder / name for name in ("last.pt", "best.pt") if (folder / name).is_file()]
    if not steps and not links:
        return
    if resumed is None or resumed[0].parent.resolve() != folder.resolve():
        newest = _describe(steps[-1] if steps else links[0], key)
        if steps and newest.endswith("of this config") and resume != "auto":
            fix = "continue them with trainer.resume=auto, or start over in another hydra.run.dir"
        else:
            fix = (
                "start this run in another hydra.run.dir, or move them away (trainer.resume="
                "auto continues only usable step*.pt checkpoints of the same config)"
            )
        started = "starts fresh" if resumed is None else f"resumes from {resumed[0]}"
        held = f"{len(steps)} step checkpoint(s)" if steps else " and ".join(p.name for p in links)
        raise ResumeError(
            f"{folder} already holds {held} this run does not continue (newest {newest}); "
            f"this run {started} and will not mix its checkpoints with them or overwrite "
            f"them: {fix}."
        )
    mine, upto = [], resumed[1]["step"]
    for path in steps:
        if not (path.stem[4:].isdigit() and int(path.stem[4:]) <= upto):
            continue  # a later step, which this run did not continue
        try:
            state = load_checkpoint(path, mmap=True)
        except CheckpointError:
            continue
        if state.get("config_key") == key and problem_with(state) is None:
            mine.append(path)
    checkpoints.adopt(mine)
