"""engine.core.records: the one reader of the engine's own files, and its typed schema check."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Annotated, Literal, TypedDict

import pytest

from engine.core.bounds import Bound, Count
from engine.core.records import Open, RecordError, problem, read_record, read_table


class _Head(TypedDict):
    kind: Literal["job"]
    step: Count


class Record(_Head, total=False):
    rate: Annotated[float, Bound(0, 1)]
    names: list[str]
    pair: tuple[Count, str]
    seed: int | None


FIX = "write it again."


@pytest.mark.parametrize(
    ("value", "says"),
    [
        ([1], "it is [1], not an object of kind, step, rate, names, pair, seed"),
        ({"kind": "job"}, "it lacks step"),
        ({"kind": "job", "step": 1, "extra": 0}, "it has fields it never holds: 'extra'"),
        ({"kind": "run", "step": 1}, "its kind is 'run', not \"job\""),
        ({"kind": "job", "step": True}, "its step is True, not an int >= 0"),  # a bool is no int
        ({"kind": "job", "step": -1}, "its step is -1, not an int >= 0"),
        ({"kind": "job", "step": 1, "rate": 1.5}, "its rate is 1.5, not a number >= 0 and <= 1"),
        ({"kind": "job", "step": 1, "rate": float("nan")}, "its rate is nan"),
        ({"kind": "job", "step": 1, "names": ["a", 2]}, "its names[1] is 2, not a string"),
        ({"kind": "job", "step": 1, "pair": [1]}, "its pair is [1], not a list of 2"),
        ({"kind": "job", "step": 1, "pair": [1, 2]}, "its pair[1] is 2, not a string"),
        ({"kind": "job", "step": 1, "seed": "7"}, "its seed is '7', not an int or null"),
    ],
)
def test_a_value_that_is_not_its_schema_is_named_by_field(value, says) -> None:
    assert problem(value, Record).startswith(says)


def test_a_value_of_its_schema_passes_and_an_open_record_keeps_other_keys() -> None:
    assert (
        problem({"kind": "job", "step": 3, "rate": 1, "pair": (0, "x"), "seed": None}, Record)
        is None
    )
    assert problem({"kind": "job", "step": 3, "val/acc": 0.5}, Annotated[_Head, Open()]) is None
    assert problem([0.5], Annotated[_Head, Open()]) == "it is [0.5], not an object"


def test_a_long_list_of_bounded_ints_is_checked_and_its_first_bad_item_named() -> None:
    labels = [0] * 1_000_000
    assert problem(labels, list[Count]) is None
    labels[777_777] = -2
    assert (
        problem(labels, list[Count]) == "its [777777] is -2, not an int >= 0 and <= 2,147,483,647"
    )


def _refused(path: Path, max_bytes: int = 1024) -> str:
    with pytest.raises(RecordError) as refused:
        read_record(path, Record, max_bytes, "a job record", FIX)
    said = str(refused.value)
    assert said.startswith(str(path)) and said.endswith(f": {FIX}") and "\n" not in said
    return said


@pytest.mark.timeout(20)  # a FIFO once blocked its reader forever
def test_a_file_that_is_not_a_regular_one_is_refused_without_blocking(tmp_path) -> None:
    fifo = tmp_path / "record.json"
    os.mkfifo(fifo)
    assert "it is a FIFO (named pipe), not a job record" in _refused(fifo)
    device = tmp_path / "zero.json"
    device.symlink_to("/dev/zero")
    assert "it is a character device, not a job record" in _refused(device)
    assert "it is a directory" in _refused(tmp_path)


@pytest.mark.parametrize(
    ("content", "says"),
    [
        (b"{oops", "is not JSON (Expecting property name"),
        (b'{"kind": "\xff"}', "is not JSON ("),  # not UTF-8
        (b"[" * 200_000 + b"]" * 200_000, "is not JSON (nested too deeply)"),
        (
            b'{"kind": "job", "step": 1, "pad": "' + b"x" * 2000 + b'"}',
            "more than a job record holds (1,024 bytes)",
        ),
        (b'{"kind": "job", "step": 2.5}', "its step is 2.5, not an int >= 0"),
    ],
)
def test_a_damaged_file_is_one_line_naming_it_and_the_fix(tmp_path, content, says) -> None:
    path = tmp_path / "record.json"
    path.write_bytes(content)
    assert says in _refused(path, max_bytes=1024 if b"pad" in content else 2**22)


def test_a_missing_file_is_left_to_its_reader_and_a_good_one_read(tmp_path) -> None:
    with pytest.raises(FileNotFoundError):
        read_record(tmp_path / "none.json", Record, 1024, "a job record", FIX)
    path = tmp_path / "ok.json"
    path.write_text(json.dumps({"kind": "job", "step": 4, "names": ["a"]}))
    assert read_record(path, Record, 1024, "a job record", FIX) == {
        "kind": "job",
        "step": 4,
        "names": ["a"],
    }


class Row(TypedDict):
    step: Count
    loss: float | None
    name: str


def test_a_table_is_read_with_typed_cells_and_a_bad_row_named_by_line(tmp_path) -> None:
    path = tmp_path / "table.csv"
    path.write_text('step,loss,name\n0,0.5,a\n1,,"b,c"\n')
    assert list(read_table(path, Row, 1024, "a table", FIX)) == [
        (2, {"step": 0, "loss": 0.5, "name": "a"}),
        (3, {"step": 1, "loss": None, "name": "b,c"}),  # an empty number cell: None
    ]
    for text, says in [
        ("step,loss,name\n0,0.5,a\n-1,1,b\n", "line 3: its step is -1, not an int >= 0"),
        ("step,loss,name\n0,x,a\n", "line 2: its loss is 'x', not a number or null"),
        ("step,loss,name\n0,1,a,extra\n", "line 2: it has more cells than columns"),
        ("step,name\n0,a\n", "line 2: it lacks loss"),
        ('step,loss,name\n0,1,"a\n', "line 2: not CSV (unexpected end of data)"),
    ]:
        path.write_text(text)
        with pytest.raises(RecordError) as refused:
            list(read_table(path, Row, 1024, "a table", FIX))
        assert f"{path} {says}" in str(refused.value) and str(refused.value).endswith(FIX)


def _fifo(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    os.mkfifo(path)
    return path


@pytest.mark.timeout(30)  # each door once blocked forever on a FIFO
def test_every_door_of_the_engines_own_files_names_a_fifo_without_blocking(tmp_path, caplog):
    """What the engine reads back of its own, given a FIFO: refused in one line naming it, or
    (where the file only narrows a search or follows a chain) passed over with a warning."""
    from engine.data.shards import ShardError
    from engine.data.shards.remote import Network
    from engine.data.shards.sources import open_shard
    from engine.runs.resume import _key_in
    from engine.runs.step_rows import start_with_rows_before
    from engine.runs.tensorboard import NOTE, continued_in
    from engine.sweeps.reuse import same_as
    from engine.sweeps.speed_knobs import PLAN, planned_sweeps
    from engine.sweeps.table import read_rows

    with pytest.raises(RecordError, match=r"summary\.csv: it is a FIFO .*move it aside"):
        read_rows(_fifo(tmp_path / "sweep" / "summary.csv"))
    with pytest.raises(ValueError, match=r"metrics\.csv: it is a FIFO .*delete it"):
        start_with_rows_before(
            tmp_path / "out.csv", [_fifo(tmp_path / "metrics.csv")], ["step"], 3, (0,)
        )
    with pytest.raises(RecordError, match=r"metrics\.json: it is a FIFO .*run the job again"):
        same_as(_fifo(tmp_path / "job" / "metrics.json").parent)
    with pytest.raises(ShardError, match=r"it is a FIFO \(named pipe\), not a shard"):
        open_shard(str(_fifo(tmp_path / "s.tar")), Network())
    assert planned_sweeps(_fifo(tmp_path / "plan" / PLAN).parent) is None
    assert _key_in(_fifo(tmp_path / "run" / "checkpoints" / "config_key")) is None
    assert continued_in(_fifo(tmp_path / "board" / NOTE).parent) is None
    warned = " ".join(caplog.messages)
    assert "passing over" in warned and "config_key" in warned and NOTE in warned


def test_what_an_attack_found_is_one_short_line() -> None:
    """Deep, long or odd values give one short line; an int past a float's range is no number."""
    deep: list = []
    for _ in range(100_000):
        deep = [deep]
    said = problem({"kind": "job", "step": deep}, Record)
    assert said.startswith("its step is [[[[...]]]], not an int") and len(said) < 200
    many = {"kind": "job", "step": 1} | {f"k{i}\nx": 0 for i in range(100_000)}
    said = problem(many, Record)
    assert said.endswith("and 99,995 more") and "\n" not in said and len(said) < 200
    assert problem({"kind": "job", "step": 1, "rate": 10**600}, Record).startswith("its rate is")
    assert "an int or a number" not in problem(
        {"kind": "job", "step": 1, "seed": "x"}, Record | None
    )


def test_a_table_refuses_a_twice_named_column_and_odd_numbers_and_takes_a_bom(tmp_path) -> None:
    path = tmp_path / "table.csv"
    for text, says in [
        ("step,step,name\n0,1,a\n", "line 1: its header names 'step' twice"),
        ("step,loss,name\n٣,1,a\n", "line 2: its step is '٣', not an int"),  # int() takes it
        ("step,loss,name\n1_000,1,a\n", "line 2: its step is '1_000', not an int"),
        ("step,loss,name\n1,1\n", "line 2: it has fewer cells than columns"),
    ]:
        path.write_text(text)
        with pytest.raises(RecordError, match=re.escape(f"{path} {says}")):
            list(read_table(path, Row, 1024, "a table", FIX))
    path.write_text("\ufeffstep,loss,name\n1,-0,a\n")
    assert list(read_table(path, Row, 1024, "a table", FIX)) == [
        (2, {"step": 1, "loss": -0.0, "name": "a"})
    ]


@pytest.mark.timeout(20)
def test_a_socket_or_a_loop_of_links_is_named_not_a_raw_oserror(tmp_path) -> None:
    import socket

    from engine.core.records import regular_file_bytes

    server = socket.socket(socket.AF_UNIX)
    server.bind(str(tmp_path / "s.json"))
    loop = tmp_path / "loop.json"
    loop.symlink_to(loop)
    with pytest.raises(ValueError, match=r"it is a socket, not a record"):
        regular_file_bytes(tmp_path / "s.json", 1024, "a record")
    with pytest.raises(
        ValueError, match=r"it cannot be opened \(Too many levels of symbolic links\)"
    ):
        regular_file_bytes(loop, 1024, "a record")
    server.close()
