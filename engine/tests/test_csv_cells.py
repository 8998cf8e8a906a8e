"""CSV injection (OWASP): every CSV writer of the engine puts a `'` before a text cell that a
spreadsheet would run as a formula, leaves numbers alone, and its readers of its own files
take exactly that `'` off again; a user's listing is read as it is. End to end on the reference
project: class names, file names and sweep overrides that start with `=`, `+`, `-` or `@`
reach every CSV a run, its eval and predict write as text a spreadsheet shows and never runs,
and the files the engine reads back (split.csv through dataset=csv, samples.csv and
bad_samples.csv on a mid-epoch resume, a sweep's summary.csv) give back exactly what was
written."""

from __future__ import annotations

import csv
import shutil
from pathlib import Path

import pytest
from omegaconf import DictConfig

from engine.core.csv_cells import ESCAPED, escape_cell, unescape_cell
from engine.core.io import write_csv
from engine.data.bad_samples import BadSample, BadSampleLedger
from engine.data.listing import read_csv_rows
from engine.data.splits import build_split
from engine.modes.evaluation import evaluate_checkpoint
from engine.modes.prediction import predict
from engine.runs.loggers.base import RunContext
from engine.runs.loggers.metrics_csv import CsvLogger
from engine.runs.sample_log import samples_by_step
from engine.sweeps.table import append_row, read_rows, write_rows
from engine_dev.cli import run_script
from reference.loop import train
from tests.conftest import TRAIN, reference_args
from tests.interrupts import kill_at_step

TRIGGERS = ("=", "+", "-", "@", "\t", "\r")
# text a spreadsheet would run, and text that only looks escaped already
HOSTILE = ["=1+2", "@SUM(1+1)", "+cmd", "-2+3", "\tx", "\rx", "=", "'=x", "''@x", "'-1+2"]
HARMLESS = ["", "cat", "'quoted", "'-1", "1+1", "a=b", "-1", "-0.5", "1e-05", "-inf", "nan"]


def _cells(path: Path) -> list[str]:
    with open(path, newline="", encoding="utf-8", errors="surrogateescape") as f:
        return [cell for row in csv.reader(f) for cell in row]


def _live(cells: list[str]) -> list[str]:
    """The cells a spreadsheet would run as a formula: text (not a number) after a trigger."""

    def number(cell: str) -> bool:
        try:
            float(cell)
        except ValueError:
            return False
        return True

    return [c for c in cells if c.startswith(TRIGGERS) and not number(c)]


@pytest.mark.parametrize("text", HOSTILE + HARMLESS)
def test_a_cell_is_escaped_only_when_it_would_run_and_reads_back_exactly(text: str) -> None:
    cell = escape_cell(text)
    assert isinstance(cell, str) and not _live([cell])
    assert cell == ("'" + text if text in HOSTILE else text)
    assert unescape_cell(cell) == text


def test_numbers_are_not_text_and_stay_as_they_are() -> None:
    for number in (-0.5, -1, 0, 2.5e-7, float("-inf"), True, None):
        assert escape_cell(number) is number


def test_write_csv_escapes_the_header_and_cells_but_not_numbers(tmp_path: Path) -> None:
    classes = ["=1+2", "@SUM(1+1)", "-minus"]
    rows = [{"true \\ predicted": name} | dict.fromkeys(classes, -3) for name in classes]
    write_csv(tmp_path / "confusion.csv", ["true \\ predicted", *classes], rows)
    write_csv(tmp_path / "hardest.csv", ["path", "loss"], [{"path": "=x.jpg", "loss": -0.5}])
    cells = _cells(tmp_path / "confusion.csv") + _cells(tmp_path / "hardest.csv")
    assert not _live(cells)
    assert {"'=1+2", "'@SUM(1+1)", "'-minus", "'=x.jpg", "-3", "-0.5"} <= set(cells)


def test_the_listing_reader_unescapes_the_projects_split_csv_only(tmp_path: Path) -> None:
    own, user = tmp_path / "split.csv", tmp_path / "mine.csv"
    rows = [{"path": "=x.jpg", "label": "@a", "split": "train"}, {"path": "-1", "label": "'=b"}]
    write_csv(own, ["path", "label", "split", ESCAPED], rows)
    user.write_text("path,label\n'=x.jpg,'@a\n-1,''=b\n")
    columns = {"dataset.path_column": "path", "dataset.label_column": "label"}
    assert not _live(_cells(own))
    read = [values for _, values in read_csv_rows(own, columns, "utf-8")]
    assert read == [("=x.jpg", "@a"), ("-1", "'=b")]  # exactly as written
    mine = [values for _, values in read_csv_rows(user, columns, "utf-8")]
    assert mine == [("'=x.jpg", "'@a"), ("-1", "''=b")]  # the user's text, untouched


def test_bad_samples_csv_is_escaped_and_a_resumed_ledger_lists_a_file_once(tmp_path: Path) -> None:
    report = tmp_path / "bad_samples.csv"
    bad = BadSample(3, "=x.jpg\udcff", "@SUM(1+1)", "-error: truncated")
    BadSampleLedger("train", 100, 1.0, report).record([bad])
    BadSampleLedger("train", 100, 1.0, report).record([bad])  # the run resumed in its dir
    cells = _cells(report)
    assert not _live(cells) and "'=x.jpg\udcff" in cells
    assert len(cells) == 2 * 5  # the header and one row: the path read back as it was
    BadSampleLedger("val", 100, 1.0, report).record([bad])  # another split: its own row
    rows = [tuple(_cells(report)[i : i + 2]) for i in range(5, 3 * 5, 5)]  # (split, index)
    assert rows == [("train", "3"), ("val", "3")] and len(_cells(report)) == 3 * 5


def test_a_sweep_table_reads_back_exactly_through_appends_and_rewrites(tmp_path: Path) -> None:
    table = tmp_path / "summary.csv"
    columns = ["job", "status", "overrides", "val/loss"]
    append_row(table, columns, {"job": 0, "status": "ok", "overrides": "+x=-1", "val/loss": -0.5})
    append_row(table, columns, {"job": 1, "status": "ok", "overrides": "'+x=@", "val/loss": 2})
    rows = read_rows(table)
    assert [r["overrides"] for r in rows] == ["+x=-1", "'+x=@"]
    write_rows(table, columns, rows)  # rewritten from what was read: escaped once, no more
    assert read_rows(table) == rows
    cells = _cells(table)
    assert not _live(cells) and {"'+x=-1", "''+x=@", "-0.5"} <= set(cells)


def test_metrics_csv_escapes_a_metric_key(tmp_path: Path) -> None:
    context = RunContext(out=tmp_path, start_step=0, cfg=None, config={}, params={})  # type: ignore[arg-type]
    logger = CsvLogger(context)
    logger.scalars({"=key": -0.5, "val/loss": 1.0}, step=1)
    logger.close()
    cells = _cells(tmp_path / "metrics.csv")
    assert not _live(cells) and {"'=key", "-0.5"} <= set(cells)


# the demo's class folders, renamed to class names a spreadsheet would run
NAMES = {
    "circle": "=1+2",
    "cross": "@SUM(1+1)",
    "square": "+plus",
    "star": "-minus",
    "triangle": "triangle",
}
TREE = "=tree"  # dataset.root, relative: every listed file name starts with `=`
ROOT_KEY = f"dataset.root='{TREE}'"
LISTED = ("dataset.train_csv=null", "dataset.val_csv=null")  # dataset=csv: one `csv`, split column


def _number(cell: str) -> bool:
    try:
        float(cell)
    except ValueError:
        return False
    return True


def _rows(path: Path) -> list[dict[str, str]]:
    with open(path, newline="", encoding="utf-8", errors="surrogateescape") as f:
        return list(csv.DictReader(f))


def _tree(demo_dir: Path, where: Path, flat: bool) -> None:
    """`where`/=tree: the demo images under the class names NAMES, flat (root/<class>/*: a
    drawn val split) or as train/ and val/; one `-junk.png` of train is unreadable."""
    for split in ("train",) if flat else ("train", "val"):
        for old, new in NAMES.items():
            shutil.copytree(
                demo_dir / "imagefolder" / split / old,
                where / TREE / ("" if flat else split) / new,
            )
    train = where / TREE / ("" if flat else "train")
    (train / NAMES["star"] / "-junk.png").write_bytes(b"not an image")


def _on_checkpoint(reference_cfg, monkeypatch, *overrides: str) -> DictConfig:
    """The reference project's config for a run on a checkpoint (mode=eval, predict), writing
    to tmp_path/out; `overrides` also stand for the command line's."""
    monkeypatch.setattr("engine.inference.session.task_overrides", lambda: list(overrides))
    return reference_cfg("out", *overrides)


def test_a_run_writes_no_csv_cell_a_spreadsheet_would_run(
    reference_cfg, demo_dir, tmp_path, monkeypatch
) -> None:
    """End to end on the reference project: a run, its eval and predict write every CSV
    escaped, numbers as numbers; dataset=csv reads split.csv back exactly; a user's listing
    is read as it is."""
    monkeypatch.chdir(tmp_path)
    _tree(demo_dir, tmp_path, flat=True)
    cfg = reference_cfg(
        "run",
        ROOT_KEY,
        "dataset.val_fraction=0.25",
        "dataset.decode.on_error=skip",
        "dataset.decode.max_bad_fraction=0.2",
        "trainer.max_epochs=1",
        "trainer.record_samples=true",
        "logger=csv",
    )
    train(cfg)
    run, out = Path(cfg.paths.output_dir), tmp_path / "out"
    evaluate_checkpoint(
        _on_checkpoint(reference_cfg, monkeypatch, "mode=eval", f"eval.checkpoint={run}")
    )
    predict(
        _on_checkpoint(
            reference_cfg,
            monkeypatch,
            "mode=predict",
            f"predict.checkpoint={run}",
            f"predict.input='{TREE}'",
        )
    )
    written = {
        name: _cells(folder / name)
        for folder, names in (
            (run, ["split.csv", "samples.csv", "bad_samples.csv", "history.csv", "metrics.csv"]),
            (out, ["per_class.csv", "confusion.csv", "hardest.csv", "predictions.csv"]),
        )
        for name in names
    }
    for name, cells in written.items():
        assert not _live(cells), (name, _live(cells)[:3])
    for name in ("split.csv", "per_class.csv", "confusion.csv", "hardest.csv"):
        assert {f"'{n}" for n in NAMES.values() if n.startswith(TRIGGERS)} <= set(written[name])
    for name in ("split.csv", "samples.csv", "hardest.csv", "predictions.csv"):
        assert any(cell.startswith(f"'{TREE}") for cell in written[name]), name
    assert f"'{TREE}/{NAMES['star']}/-junk.png" in written["bad_samples.csv"]
    # numbers are written as numbers, never escaped
    hardest = _rows(out / "hardest.csv")
    assert all(_number(r["score"]) and _number(r["loss"]) for r in hardest)
    assert all(_number(r["score"]) for r in _rows(out / "predictions.csv"))
    assert all(_number(v) for r in _rows(run / "history.csv") for v in r.values())
    assert all(_number(r["support"]) for r in _rows(out / "per_class.csv"))

    # split.csv is the project's: dataset=csv reads it back exactly as the run drew it
    listing = f"dataset.csv={run / 'split.csv'}"  # its paths are relative to the working dir
    again = reference_cfg("again", "dataset=csv", listing, *LISTED, f"dataset.root={tmp_path}")
    for split in ("train", "val"):
        drawn = {
            (r["path"][1:], r["label"]) for r in _rows(run / "split.csv") if r["split"] == split
        }
        read = build_split(again.dataset, split, None, sorted(NAMES.values()))
        listed = {(read.get_filename(i), read.classes[read.targets[i]]) for i in range(len(read))}
        assert {(Path(p).relative_to(tmp_path).as_posix(), c) for p, c in listed} == {
            (p, c if c == "triangle" else c[1:]) for p, c in drawn
        }
    # a user's own listing is the user's text: a leading ' stays, whatever follows it
    mine = tmp_path / "mine.csv"
    first = sorted((tmp_path / TREE / "triangle").iterdir())[0].relative_to(tmp_path)
    mine.write_text(f"path,label,split\n{first},'=quoted,train\n{first},'=quoted,val\n")
    users = reference_cfg(
        "users", "dataset=csv", f"dataset.csv={mine}", *LISTED, f"dataset.root={tmp_path}"
    )
    assert build_split(users.dataset, "train", None, ["'=quoted"]).classes == ["'=quoted"]


# the 48 demo train images and the junk one, batch 8: killed in epoch 2, resumed mid-epoch
# from the step-8 checkpoint
RESUMED = (
    "trainer.max_epochs=2",
    "trainer.record_samples=true",
    "trainer.checkpoint.every_n_steps=2",
    "loader.batch_size=8",
    "dataset.decode.on_error=skip",
    "dataset.decode.max_bad_fraction=0.2",
    ROOT_KEY,
)


def test_a_mid_epoch_resume_reads_back_its_escaped_csvs_exactly(
    reference_cfg, demo_dir, tmp_path, monkeypatch
) -> None:
    monkeypatch.chdir(tmp_path)
    _tree(demo_dir, tmp_path, flat=False)
    whole, out = tmp_path / "whole", tmp_path / "run"
    train(reference_cfg("whole", *RESUMED))
    kill_at_step(monkeypatch, 9)
    with pytest.raises(RuntimeError, match="killed"):
        train(reference_cfg("run", *RESUMED))
    monkeypatch.undo()
    monkeypatch.chdir(tmp_path)
    train(reference_cfg("run", *RESUMED, f"trainer.resume={out}"))
    assert samples_by_step(out) == samples_by_step(whole)  # the same samples in every step
    paths = [r["path"] for r in _rows(out / "samples.csv")]
    assert paths == [r["path"] for r in _rows(whole / "samples.csv")]
    assert all(p.startswith(f"'{TREE}/train/") for p in paths)  # every file name escaped
    junk = [c for c in _cells(out / "bad_samples.csv") if c.endswith("-junk.png")]
    assert junk == [f"'{TREE}/train/{NAMES['star']}/-junk.png"]  # listed once, across the resume


def test_a_sweep_summary_escapes_its_overrides_and_reads_them_back(
    demo_dir: Path, tmp_path: Path
) -> None:
    sweep = (
        "-m",
        *reference_args(demo_dir, tmp_path / "runs", "mode=benchmark"),
        "benchmark.batches=3",
        "benchmark.warmup=1",
        f"hydra.sweep.dir={tmp_path}",
        "+note=-1+2,'@SUM(1+1)'",  # sorted first: each job's overrides start with `+`
    )
    result = run_script(TRAIN, *sweep, cwd=tmp_path)
    assert result.returncode == 0, (result.stdout + result.stderr)[-3000:]
    cells = _cells(tmp_path / "summary.csv")  # rewritten from what it read at the sweep's end
    assert not _live(cells), _live(cells)[:3]
    rows = _rows(tmp_path / "summary.csv")
    assert sorted(r["overrides"].split()[0] for r in rows) == ["'+note='@SUM(1+1)'", "'+note=-1+2"]
    assert all(_number(r["loader/samples_per_s"]) and r["tied"] in ("yes", "no") for r in rows)
    # the sweep reads its table back: each job's overrides match, so neither runs again
    again = run_script(TRAIN, *sweep, "summary.skip_completed=true", cwd=tmp_path)
    assert again.returncode == 0, (again.stdout + again.stderr)[-3000:]
    said = again.stdout + again.stderr
    assert "job 0 already finished ok" in said and "job 1 already finished ok" in said
