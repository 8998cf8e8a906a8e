"""TensorBoard output of a run: scalars, labelled image grids, figures, config text, hparams.

One x-axis, the optimizer step, counted over the whole training: train/loss (the mean since
the previous point) and train/lr at every logged step; the per-epoch scalars (val/*,
train/epoch_loss, train/acc, train/samples_per_s, ..., and `epoch` itself) at the step that
ended their epoch. A resumed training stays one TensorBoard run: its writer starts with
`purge_step` = the checkpoint's step + 1, so TensorBoard drops whatever the interrupted run
wrote after that checkpoint (every tag, since all share the axis), and the resumed run
writes it anew. When it resumes into a new run dir, the earlier event files move in first
(`take_over_events`): one folder, one run.
"""

from __future__ import annotations

import errno
import logging
import shutil
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch
from tensorboard.compat.proto.summary_pb2 import Summary
from tensorboard.plugins.hparams.api_pb2 import Experiment, HParamInfo, MetricInfo, MetricName
from tensorboard.plugins.hparams.metadata import EXPERIMENT_TAG, create_summary_metadata
from tensorboard.plugins.hparams.plugin_data_pb2 import HParamsPluginData
from torch.utils.tensorboard import SummaryWriter
from torch.utils.tensorboard.summary import hparams

from engine.core import folder_lock
from engine.core.io import atomic_write_bytes
from engine.core.records import regular_file_bytes
from engine.runs.run_lock import LOCK_NAME

if TYPE_CHECKING:  # matplotlib costs 0.35 s of every run's start; figures are drawn elsewhere
    from matplotlib.figure import Figure

log = logging.getLogger(__name__)

# TensorBoard opens the first two tag groups (in ASCII order) and folds the rest: the stage
# timings go under ~pipeline/ (after train/ and val/, one click away; the metric keys stay
# pipeline/<stage>_ms everywhere else), and the epoch number, no curve, is not drawn (the step
# is the axis; history.csv has it)
BOARD_PREFIXES = {"pipeline/": "~pipeline/"}
UNDRAWN = frozenset({"epoch"})


def board_tag(key: str) -> str | None:
    """The TensorBoard tag of metric `key`; None when it is not drawn."""
    if key in UNDRAWN:
        return None
    for prefix, board in BOARD_PREFIXES.items():
        if key.startswith(prefix):
            return board + key.removeprefix(prefix)
    return key


NOTE = "CONTINUED.txt"  # left in a tensorboard/ folder whose events moved to a resumed run
MOVED = "moved to: "  # the NOTE's line naming where they went
READ_ONLY = (errno.EACCES, errno.EPERM, errno.EROFS)


def event_files(folder: Path) -> list[Path]:
    """The TensorBoard event files directly in `folder`, in the order TensorBoard reads them."""
    if not folder.is_dir():
        return []
    return sorted(p for p in folder.iterdir() if "tfevents" in p.name and p.is_file())


def continued_in(folder: Path) -> Path | None:
    """The tensorboard/ folder the events of `folder` moved to (its NOTE says), or None."""
    try:
        lines = regular_file_bytes(folder / NOTE, 2**20, "a board's note").decode().splitlines()
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as err:  # not a file, too large, not text: no chain followed
        log.warning("passing over %s (%s): its events are not followed on", folder / NOTE, err)
        return None
    moved = [line.removeprefix(MOVED) for line in lines if line.startswith(MOVED)]
    return Path(moved[-1]) if moved else None


def _chain(source: Path, board: Path) -> list[Path]:
    """`source`, then the folders its events moved on to (NOTE after NOTE), up to `board`: a
    training resumed from the same checkpoint twice (the first resumed run was killed before
    its own first checkpoint) finds the events where the first resume took them. A folder of
    a run still going (its run dir locked) is left alone."""
    folders = [source]
    while (nxt := continued_in(folders[-1])) is not None and nxt.resolve() != board.resolve():
        if nxt in folders or not nxt.is_dir():
            break
        if folder_lock.is_held(nxt.parent / LOCK_NAME):
            log.warning(
                "TensorBoard: the events of %s moved on to %s, a run going on now: they stay "
                "there (this run's TensorBoard starts at its checkpoint)",
                source,
                nxt,
            )
            break
        folders.append(nxt)
    return folders


def take_over_events(source: Path, board: Path) -> int:
    """Move the event files of the training this run continues (its tensorboard/ folder
    `source`, and wherever they moved on to: `_chain`) into this run's `board` folder
    (copied, then removed, across file systems), leaving a note saying where, written
    before the first file moves, so a kill midway loses nothing; returns how many came.
    Their names keep TensorBoard's reading order: the earlier run's files first. A folder
    that cannot be changed (a colleague's read-only run) keeps its files: they are copied,
    with a warning."""
    if source.resolve() == board.resolve():
        return 0
    taken = 0
    for folder in _chain(source, board):
        files = event_files(folder)
        if not files:
            continue
        board.mkdir(parents=True, exist_ok=True)
        taken += _take(folder, files, board)
    return taken


def _moved(file: Path, target: Path, may_move: bool) -> bool:
    """Move `file` to `target`; where its folder cannot be changed (read-only, or `may_move`
    false), copy it instead and return False: the original stays."""
    if may_move:
        try:
            shutil.move(file, target)
            return True
        except OSError as err:
            if err.errno not in READ_ONLY:
                raise
    if not target.is_file():
        shutil.copy2(file, target)
    return False


def _take(folder: Path, files: list[Path], board: Path) -> int:
    note: Path | None = folder / NOTE
    text = (
        f"This training went on in {board.parent} (trainer.resume): its TensorBoard event "
        f"files moved there, so that one TensorBoard run shows the whole training.\n"
        f"{MOVED}{board}\n"
    )
    try:  # replaced, never written through: a NOTE that is a link changes nothing elsewhere
        atomic_write_bytes(note, text.encode())  # type: ignore[arg-type]
    except OSError as err:
        if err.errno not in READ_ONLY:
            raise
        note = None
    kept = [file for file in files if not _moved(file, board / file.name, note is not None)]
    if kept:
        if note is not None:
            note.unlink()  # the files stay: nothing moved on from here
        log.warning(
            "TensorBoard: %s cannot be changed: its %d event file(s) were copied into %s and "
            "stay there too (TensorBoard shows the training's start in both runs)",
            folder,
            len(kept),
            board,
        )
    else:
        log.info("TensorBoard: %d event file(s) of %s moved into %s", len(files), folder, board)
    return len(files)


class TensorBoardLogger:
    """A SummaryWriter with the few calls the engine makes (built on rank 0 only).
    `purge_step`: TensorBoard hides the events this folder's earlier files hold at that step
    or later (a resumed or restarted training; see the module docstring)."""

    def __init__(self, log_dir: str | Path, purge_step: int | None = None) -> None:
        self.log_dir = Path(log_dir)
        self.writer = SummaryWriter(log_dir=str(log_dir), purge_step=purge_step)

    def scalars(self, values: dict[str, float], step: int) -> None:
        """One point per metric key at `step`, under its board_tag."""
        for key, value in values.items():
            tag = board_tag(key)
            if tag is not None:
                self.writer.add_scalar(tag, value, step)

    def image(self, tag: str, image: torch.Tensor, step: int = 0) -> None:
        """One image in [0, 1], shape (C, H, W), e.g. a labelled grid (engine/core/grid.py)."""
        self.writer.add_image(tag, image.float().cpu(), step)

    def figure(self, tag: str, figure: Figure, step: int = 0) -> None:
        """A matplotlib figure as an image."""
        self.writer.add_figure(tag, figure, step, close=False)

    def flush(self) -> None:
        """Put everything written so far into the event file."""
        self.writer.flush()

    def text(self, tag: str, text: str, step: int = 0) -> None:
        """Preformatted text (indented, so TensorBoard's markdown keeps it verbatim)."""
        indented = "\n".join("    " + line for line in text.splitlines())
        self.writer.add_text(tag, indented, step)

    def hparams(
        self,
        params: dict[str, Any],
        tags: list[str],
        step: int = 0,
        trial: str = "",
        columns: bool = True,
    ) -> None:
        """Record `params` for the HParams tab, with the scalar `tags` of this run as its
        metrics (the table shows each one's last point; nothing else is written for them),
        at `step` (a training's: one past its last, where a resume from its last checkpoint
        purges it before writing its own), named `trial` in the table ("": by its path).

        Written into this run's own event file, so sweep jobs compare side by side; with
        `columns=False` without the table's column list (TensorBoard takes one run's list
        for all runs: a sweep writes its own, `experiment`).
        """
        drawn = [tag for key in tags if (tag := board_tag(key)) is not None]  # as scalars drew them
        exp, ssi, sei = hparams(params, dict.fromkeys(drawn, 0.0))
        data = HParamsPluginData.FromString(ssi.value[0].metadata.plugin_data.content)
        data.session_start_info.group_name = trial  # the table's Trial ID
        for key, value in params.items():
            if isinstance(value, bool):  # torch writes them as 1.0 / 0.0
                data.session_start_info.hparams[key].bool_value = value
        ssi.value[0].metadata.plugin_data.content = data.SerializeToString()
        for summary in (exp, ssi, sei) if columns else (ssi, sei):
            self.writer.file_writer.add_summary(summary, step)

    def experiment(self, infos: list[HParamInfo], tags: list[str]) -> None:
        """The HParams table's columns for every run under the same --logdir: `infos` in
        their order (TensorBoard shows those marked `differs` first), then the scalar
        `tags` as metrics."""
        metrics = [MetricInfo(name=MetricName(tag=tag)) for tag in tags]
        experiment = Experiment(hparam_infos=infos, metric_infos=metrics)
        meta = create_summary_metadata(HParamsPluginData(experiment=experiment))
        value = Summary.Value(tag=EXPERIMENT_TAG, metadata=meta)
        self.writer.file_writer.add_summary(Summary(value=[value]))

    def close(self) -> None:
        """Flush and close the event file."""
        self.writer.close()

    def __enter__(self) -> TensorBoardLogger:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
