"""A sweep's own TensorBoard entry, written when it ends: the HParams table's columns for its
jobs and summary.png as an image, in the sweep dir's tensorboard/ (linked into the
TensorBoard index beside the jobs: engine/runs/tensorboard_index.py).

The columns: the keys the sweep varied first (marked `differs`, which TensorBoard shows
first), then the other values that differ between its jobs; values every job shares are left
out. The metrics: the mode's metrics (loader figures, val/acc, ...) that the jobs logged, so
the table compares the jobs by each. Each job wrote its own values and name (its Trial ID,
engine/runs/hparams.trial_name) but no columns: TensorBoard takes one run's for all.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from google.protobuf.json_format import MessageToDict
from tensorboard.backend.event_processing.event_file_loader import EventFileLoader
from tensorboard.plugins.hparams.api_pb2 import DataType, HParamInfo, Interval
from tensorboard.plugins.hparams.metadata import (
    SESSION_START_INFO_TAG,
    parse_session_start_info_plugin_data,
)
from tensorboard.plugins.scalar.metadata import PLUGIN_NAME as SCALARS
from torchcodec.decoders import decode_png

from engine.runs.tensorboard import TensorBoardLogger, board_tag, event_files
from engine.sweeps.plot import swept_keys

BOARD = "tensorboard"  # the sweep dir's folder for its own entry, as a job's


def _read(board: Path) -> tuple[dict[str, Any] | None, set[str]]:
    """(HParams values or None, scalar tags) of the run whose event files are in `board`."""
    values, tags = None, set()
    for file in event_files(board):
        for event in EventFileLoader(str(file)).Load():
            for value in event.summary.value:
                if value.metadata.plugin_data.plugin_name == SCALARS:  # as the loader reads them
                    tags.add(value.tag)
                elif value.tag == SESSION_START_INFO_TAG:
                    start = parse_session_start_info_plugin_data(value.metadata.plugin_data.content)
                    values = {key: MessageToDict(v) for key, v in start.hparams.items()}
    return values, tags


def job_runs(rows: list[dict[str, str]]) -> list[tuple[dict[str, Any], set[str]]]:
    """(HParams values, scalar tags) of each job that ran ok and wrote an HParams entry, as
    its event files hold them."""
    runs = []
    for row in rows:
        if row["status"] == "ok":
            values, tags = _read(Path(row["dir"]) / BOARD)
            if values is not None:
                runs.append((values, tags))
    return runs


def column(name: str, values: list[Any], swept: bool) -> HParamInfo:
    """One HParams column: numbers as an interval, anything else as its distinct values."""
    if all(isinstance(v, bool) for v in values):
        info = HParamInfo(name=name, type=DataType.DATA_TYPE_BOOL, differs=swept)
        info.domain_discrete.extend(sorted(set(values)))
        return info
    if all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values):
        interval = Interval(min_value=min(values), max_value=max(values))
        return HParamInfo(
            name=name, type=DataType.DATA_TYPE_FLOAT64, domain_interval=interval, differs=swept
        )
    info = HParamInfo(name=name, type=DataType.DATA_TYPE_STRING, differs=swept)
    info.domain_discrete.extend(sorted({str(v) for v in values}))
    return info


def columns(values: list[dict[str, Any]], swept: list[str]) -> list[HParamInfo]:
    """The swept keys' columns, then those of the other keys whose value differs."""
    keys = list(dict.fromkeys(key for run in values for key in run))
    by_key = {key: [run.get(key) for run in values] for key in keys}
    differ = [k for k in keys if len({repr(v) for v in by_key[k]}) > 1]
    first = [k for k in swept if k in by_key]
    return [
        column(key, [v for v in by_key[key] if v is not None], key in first)
        for key in [*first, *(k for k in differ if k not in first)]
    ]


def write_sweep_board(
    rows: list[dict[str, str]], metric_keys: tuple[str, ...], sweep_dir: Path, plot: Path
) -> Path | None:
    """Write the sweep's entry (see the module docstring) into `sweep_dir`/tensorboard/,
    replacing an earlier one (a sweep rerun into the same dir); returns the folder, or None
    when no job wrote an HParams entry."""
    runs = job_runs(rows)
    if not runs:
        return None
    logged = set.intersection(*(tags for _, tags in runs))
    board = sweep_dir / BOARD
    for old in event_files(board):
        old.unlink()
    with TensorBoardLogger(board) as tb:
        tb.experiment(
            columns([values for values, _ in runs], swept_keys(rows)),
            [tag for key in metric_keys if (tag := board_tag(key)) in logged],
        )
        if plot.is_file():
            tb.image("sweep/summary", decode_png(plot, mode="RGB") / 255)
    return board
