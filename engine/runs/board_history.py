"""One training, one TensorBoard run: a resumed training carries the events of the run it
continues into its own event file, up to the checkpoint it resumed from, and removes that run's
event files. TensorBoard then shows one continuous series per tag: nothing twice (the killed
run's tail after its last checkpoint is dropped, and this run writes it anew), nothing missing.

What is kept follows the two x-axes (engine/runs/tensorboard.py): per-step series up to the
checkpoint's optimizer step, everything else up to its last finished epoch (a mid-epoch
checkpoint's epoch is evaluated again). The config text and the HParams entry are left out:
the resumed run writes its own.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from tensorboard.backend.event_processing.event_file_loader import LegacyEventFileLoader
from tensorboard.compat.proto.event_pb2 import Event
from tensorboard.compat.proto.summary_pb2 import Summary

from engine.runs.tensorboard import STEP_TAGS, TensorBoardLogger

log = logging.getLogger(__name__)

NOTE = "CONTINUED.txt"  # left in the tensorboard/ folder whose events moved to a resumed run
REWRITTEN = ("text", "hparams")  # plugins whose summaries the resumed run writes itself


def event_files(folder: Path) -> list[Path]:
    """The TensorBoard event files directly in `folder`, in the order TensorBoard reads them."""
    if not folder.is_dir():
        return []
    return sorted(p for p in folder.iterdir() if "tfevents" in p.name and p.is_file())


def _kept(value: Summary.Value, at: int, step: int, epochs: int) -> bool:
    if value.metadata.plugin_data.plugin_name in REWRITTEN:
        return False
    return at <= (step if value.tag in STEP_TAGS else epochs)


class ResumedHistory:
    """The TensorBoard events of the run that wrote checkpoint `path` (state `state`), to be
    carried into the resumed run's own event file. The files are listed at creation, before
    the resumed run's writer adds its own (the folder may be the same: a requeued job)."""

    def __init__(self, path: Path, state: dict[str, Any]) -> None:
        in_run_dir = path.parent.name == "checkpoints"
        self.source = path.parent.parent / "tensorboard" if in_run_dir else None
        self.files = event_files(self.source) if self.source is not None else []
        self.step = state["step"]
        self.epochs = state["epoch"] - (state["batches_done"] is not None)

    def carry(self, tb: TensorBoardLogger) -> int:
        """Write the kept events into `tb` (their steps and wall times unchanged), then
        remove the files they came from; returns how many events were carried."""
        carried = 0
        for file in self.files:
            for event in LegacyEventFileLoader(str(file)).Load():
                if not event.HasField("summary"):
                    continue  # the file version record: the new file has its own
                values = [
                    v for v in event.summary.value if _kept(v, event.step, self.step, self.epochs)
                ]
                if values:
                    kept = Event(wall_time=event.wall_time, step=event.step)
                    kept.summary.value.extend(values)
                    tb.event(kept)
                    carried += 1
        tb.flush()  # the history is safe in the new file before the old files go
        for file in self.files:
            file.unlink()
        if self.files and self.source is not None and self.source.resolve() != tb.log_dir.resolve():
            (self.source / NOTE).write_text(
                f"This training went on in {tb.log_dir.parent} (trainer.resume): its TensorBoard "
                f"events up to optimizer step {self.step} (epoch {self.epochs}) moved there, so "
                "that TensorBoard run shows the whole training.\n"
            )
        if self.files:
            log.info(
                "TensorBoard: %d events up to step %d / epoch %d carried over from %s",
                carried,
                self.step,
                self.epochs,
                self.source,
            )
        return carried
