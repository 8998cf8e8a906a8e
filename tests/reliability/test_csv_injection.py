"""CSV injection (OWASP): class names, file names and sweep overrides that start with `=`, `+`,
`-` or `@` reach every CSV a run writes as text a spreadsheet shows and never runs (a leading
`'`), numbers stay numbers, and the files the project reads back (split.csv through
dataset=csv, samples.csv and bad_samples.csv on a mid-epoch resume, a sweep's summary.csv)
give back exactly what was written."""

from __future__ import annotations

import csv
import shutil
from pathlib import Path

import pytest

from engine.data.splits import build_split
from engine.modes.evaluation import evaluate_checkpoint
from engine.modes.prediction import predict
from engine.runs.sample_log import samples_by_step
from src.loop import train
from tests.cli import run_cli
from tests.test_elastic_resume import RUN
from tests.train_process import kill_at_step

ROOT = Path(__file__).resolve().parents[2]
TRIGGERS = ("=", "+", "-", "@", "\t", "\r")
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


def _cells(path: Path) -> list[str]:
    with open(path, newline="", encoding="utf-8", errors="surrogateescape") as f:
        return [cell for row in csv.reader(f) for cell in row]


def _number(cell: str) -> bool:
    try:
        float(cell)
    except ValueError:
        return False
    return True


def _live(cells: list[str]) -> list[str]:
    """The cells a spreadsheet would run as a formula: text (no number) after a trigger."""
    return [c for c in cells if c.startswith(TRIGGERS) and not _number(c)]


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


def test_a_run_writes_no_csv_cell_a_spreadsheet_would_run(
    make_cfg, on_checkpoint, demo_dir, tmp_path, monkeypatch
) -> None:
    monkeypatch.chdir(tmp_path)
    _tree(demo_dir, tmp_path, flat=True)
    cfg = make_cfg(
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
    evaluate_checkpoint(on_checkpoint("mode=eval", f"eval.checkpoint={run}"))
    predict(on_checkpoint("mode=predict", f"predict.checkpoint={run}", f"predict.input='{TREE}'"))
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
    again = make_cfg("dataset=csv", listing, f"dataset.root={tmp_path}")
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
    users = make_cfg("dataset=csv", f"dataset.csv={mine}", f"dataset.root={tmp_path}")
    assert build_split(users.dataset, "train", None, ["'=quoted"]).classes == ["'=quoted"]


# the 48 demo train images and the junk one, batch 8: killed in epoch 2, resumed mid-epoch
# from the step-8 checkpoint (as tests/test_elastic_resume.py does)
RESUMED = (
    *RUN,
    "loader.batch_size=8",
    "dataset.decode.on_error=skip",
    "dataset.decode.max_bad_fraction=0.2",
    ROOT_KEY,
)


def test_a_mid_epoch_resume_reads_back_its_escaped_csvs_exactly(
    make_cfg, demo_dir, tmp_path, monkeypatch
) -> None:
    monkeypatch.chdir(tmp_path)
    _tree(demo_dir, tmp_path, flat=False)
    whole, out = tmp_path / "whole", tmp_path / "run"
    train(make_cfg(*RESUMED, f"paths.output_dir={whole}"))
    kill_at_step(monkeypatch, 9)
    with pytest.raises(RuntimeError, match="killed"):
        train(make_cfg(*RESUMED, f"paths.output_dir={out}"))
    monkeypatch.undo()
    monkeypatch.chdir(tmp_path)
    train(make_cfg(*RESUMED, f"trainer.resume={out}", f"paths.output_dir={out}"))
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
        "mode=benchmark",
        "benchmark.batches=3",
        "benchmark.warmup=1",
        f"paths.demo_dir={demo_dir}",
        f"hydra.sweep.dir={tmp_path}",
        "+note=-1+2,'@SUM(1+1)'",  # sorted first: each job's overrides start with `+`
    )
    result = run_cli(*sweep, cwd=ROOT)
    assert result.returncode == 0, (result.stdout + result.stderr)[-3000:]
    cells = _cells(tmp_path / "summary.csv")  # rewritten from what it read at the sweep's end
    assert not _live(cells), _live(cells)[:3]
    rows = _rows(tmp_path / "summary.csv")
    assert sorted(r["overrides"].split()[0] for r in rows) == ["'+note='@SUM(1+1)'", "'+note=-1+2"]
    assert all(_number(r["loader/samples_per_s"]) and r["tied"] in ("yes", "no") for r in rows)
    # the sweep reads its table back: each job's overrides match, so neither runs again
    again = run_cli(*sweep, "summary.skip_completed=true", cwd=ROOT)
    assert again.returncode == 0, (again.stdout + again.stderr)[-3000:]
    said = again.stdout + again.stderr
    assert "job 0 already finished ok" in said and "job 1 already finished ok" in said
