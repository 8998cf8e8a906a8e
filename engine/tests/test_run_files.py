"""The run dir's own files, read back as hostile input when a training resumes: samples.csv
and metrics.csv keep names holding line breaks, quotes and commas, and a row edited by hand
is refused in one line naming the file, the line and the fix."""

from __future__ import annotations

import csv
import re
from pathlib import Path

import pytest
import torch

from engine.data.sample_ids import SampleIds
from engine.runs.loggers.base import RunContext
from engine.runs.loggers.metrics_csv import CsvLogger
from engine.runs.sample_log import FILE, SampleLog, samples_by_step
from engine.sweeps.reuse import same_as
from engine.training.batches import DeviceBatch
from engine_dev.fixtures import Labels

# file names a folder may hold: a line break (\n, \r), a quote, a comma
NAMES = ["plain.png", "two\nlines.png", "carriage\rreturn.png", 'say "hi".png', "a,b.png", "x.png"]


class Named(Labels):
    """Labels whose samples have the hostile file names NAMES."""

    def get_filename(self, index: int) -> str:
        return f"/data/{NAMES[index % len(NAMES)]}"


def _batch(indices: list[int]) -> DeviceBatch:
    zeros = torch.zeros(len(indices))
    batch = DeviceBatch(zeros, zeros, ())
    batch.ids = SampleIds(indices)
    return batch


def _written(out: Path, steps: int) -> SampleLog:
    """samples.csv of `steps` steps of 2 samples each, every name of NAMES among them."""
    dataset = Named(list(range(12)), 12)
    samples = SampleLog(out, dataset, 0, write=True)
    for step in range(steps):
        samples.add(1, step, _batch([2 * step, 2 * step + 1]))
    samples.flush()
    return samples


def test_names_with_line_breaks_survive_a_resume_byte_for_byte(tmp_path: Path) -> None:
    _written(tmp_path, 6)
    whole = (tmp_path / FILE).read_bytes()
    SampleLog(tmp_path, Named(list(range(12)), 12), 4, write=True)  # resumed at step 4
    kept = (tmp_path / FILE).read_bytes()
    assert whole.startswith(kept) and kept.count(b"two\nlines.png") == 2
    assert samples_by_step(tmp_path) == {step: [2 * step, 2 * step + 1] for step in range(4)}
    with open(tmp_path / FILE, newline="") as f:
        paths = [row["path"] for row in csv.DictReader(f)]
    assert paths == [f"/data/{name}" for name in NAMES] + [
        "/data/plain.png",
        "/data/two\nlines.png",
    ]


@pytest.mark.parametrize(
    ("edit", "says"),
    [
        (lambda text: text.replace("1,2,0,,4,", "1,x,0,,4,"), "line 7: .*its step not a whole"),
        (lambda text: text.replace("1,2,0,,5,", "1,2,0,5,"), "line 8: .*5 cells, not the 6 of"),
        (lambda text: text.replace('a,b.png"', "a,b.png"), "line 7: .*',' expected after '\"'"),
        # past int()'s 4,300-digit limit: once a raw ValueError naming no file
        (
            lambda text: text.replace("\n1,2,", "\n1," + "9" * 5000 + ",", 1),
            "line 7: .*its step not a whole number of at most 18 digits",
        ),
    ],
)
def test_a_hand_edited_samples_row_is_refused_naming_file_and_line(tmp_path, edit, says):
    _written(tmp_path, 6)
    path = tmp_path / FILE
    path.write_bytes(edit(path.read_bytes().decode()).encode())
    with pytest.raises(ValueError) as refused:
        SampleLog(tmp_path, Named(list(range(12)), 12), 6, write=True)
    said = str(refused.value)
    assert said.startswith(f"{path}, line ") and re.search(says, said)
    assert "put the line back as it was, or delete it" in said and "\n" not in said.strip("'")


def test_a_hand_edited_metrics_row_is_refused_naming_file_and_line(tmp_path: Path) -> None:
    (tmp_path / "metrics.csv").write_text("step,key,value\n0,train/loss,1.0\nzero,a,1\n")
    run = RunContext(tmp_path, 1, None, {}, {})  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"metrics\.csv, line 3: 'zero,a,1' is no row"):
        CsvLogger(run)
    (tmp_path / "metrics.csv").write_text("step,key,value\n" + "9" * 5000 + ",a,1\n")
    with pytest.raises(ValueError, match=r"metrics\.csv, line 2: '9{57}\.\.\.' is no row"):
        CsvLogger(run)


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("{oops", "it is not JSON"),
        ("[0.5]", "it is [0.5], not an object"),
        ('{"val/acc": 0.5, "same_as": "3"}', "its same_as is '3', not an int >= 0"),
    ],
)
def test_a_hand_edited_metrics_json_is_refused_naming_the_file(tmp_path, text, says) -> None:
    """A sweep reads its jobs' metrics.json back (summary.skip_completed, skip_same)."""
    path = tmp_path / "metrics.json"
    path.write_text(text)
    with pytest.raises(ValueError) as refused:
        same_as(tmp_path)
    said = str(refused.value)
    assert said.startswith(f"{path}: {says}") and "delete it and run the job again" in said
