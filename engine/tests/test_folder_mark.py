"""One owned folder for every writer (engine/core/folder_mark.py): the rules every writer's
claim follows, on folders made here."""

from __future__ import annotations

import json

from engine import __version__
from engine.core import folder_lock
from engine.core.folder_mark import claim, owner_problem

FILES = frozenset({"metrics.json", "report.csv"})


def test_a_new_or_empty_folder_is_claimed_with_a_mark_naming_writer_version_and_files(tmp_path):
    assert owner_problem(tmp_path / "new", ".mark", "mode=x", FILES) is None
    assert owner_problem(tmp_path, ".mark", "mode=x", FILES) is None
    claim(tmp_path, ".mark", "mode=x", FILES)
    try:
        record = json.loads((tmp_path / ".mark").read_text())
        assert (record["writer"], record["version"], record["files"]) == (
            "mode=x", __version__, ["metrics.json", "report.csv"]
        )  # fmt: skip
    finally:
        folder_lock.release(tmp_path / ".mark")


def test_entries_without_a_mark_or_under_another_writers_mark_are_refused(tmp_path):
    (tmp_path / "notes.txt").write_text("mine\n")
    assert owner_problem(tmp_path, ".mark", "mode=x", FILES).startswith(
        f"{tmp_path} already holds notes.txt, and no .mark (the mark mode=x leaves in a folder "
        "of its own)"
    )
    assert owner_problem(tmp_path, ".mark", "mode=x", FILES, ours=frozenset({"notes.txt"})) is None
    (tmp_path / ".mark").write_text(json.dumps({"writer": "mode=y", "files": []}))
    assert owner_problem(tmp_path, ".mark", "mode=x", FILES) == (
        f"{tmp_path} is the folder of mode=y (its .mark says so), and mode=x would write over "
        "that one's files"
    )


def test_a_writer_replaces_only_the_files_its_mark_lists(tmp_path):
    """An older version's mark listing fewer files: a file of the newer one's names found
    there is someone else's; an old mark naming no writer or files counts as this writer's."""
    (tmp_path / "report.csv").write_text("a user's\n")
    (tmp_path / ".mark").write_text(json.dumps({"writer": "mode=x", "files": ["metrics.json"]}))
    assert owner_problem(tmp_path, ".mark", "mode=x", FILES) == (
        f"{tmp_path} holds report.csv, which its mark (.mark) does not list as mode=x's, and "
        "mode=x would write over them"
    )
    (tmp_path / ".mark").write_text("")  # an old lock file: no record
    assert owner_problem(tmp_path, ".mark", "mode=x", FILES) is None
    claim(tmp_path, ".mark", "mode=x", frozenset({"more.csv"}))
    try:
        assert json.loads((tmp_path / ".mark").read_text())["files"] == ["more.csv"]
    finally:
        folder_lock.release(tmp_path / ".mark")


def test_a_writer_filling_only_its_names_sits_beside_others_and_refuses_its_names_taken(
    tmp_path,
):
    """`beside` (mode=cache, mode=shards): an unmarked folder's other entries stay; one of the
    writer's names there is someone else's unless an earlier engine's records say it is ours."""
    (tmp_path / "raw").mkdir()
    assert owner_problem(tmp_path, ".mark", "mode=x", FILES, beside=True) is None
    (tmp_path / "report.csv").write_text("a user's\n")
    assert owner_problem(tmp_path, ".mark", "mode=x", FILES, beside=True) == (
        f"{tmp_path} holds report.csv, which no .mark there lists as written by mode=x (the "
        "mark it leaves in its folders): it is someone else's, and mode=x replaces only files "
        "it wrote itself"
    )
    ours = frozenset({"report.csv"})
    assert owner_problem(tmp_path, ".mark", "mode=x", FILES, ours, beside=True) is None


def test_a_folder_holding_another_writers_mark_is_refused_by_every_writer(tmp_path):
    """A run dir given as cache.dir, a cache.dir given as shards.dir: the mark of the one that
    owns it is named, whatever the writer and its rule for entries beside."""
    (tmp_path / ".run.lock").write_text(json.dumps({"writer": "mode=train"}))
    for mark in (".cache.lock", ".shards.lock"):
        assert owner_problem(tmp_path, mark, "mode=y", FILES, beside=True) == (
            f"{tmp_path} is the folder of a run of mode=train (its .run.lock says so), and "
            "mode=y writes only into a folder of its own (a new folder inside it is one)"
        )
    (tmp_path / ".run.lock").unlink()
    (tmp_path / ".cache.lock").write_text("")  # an old cache's lock: no record
    assert owner_problem(tmp_path, ".shards.lock", "mode=shards", FILES, beside=True) == (
        f"{tmp_path} is the folder of mode=cache (its .cache.lock says so), and mode=shards "
        "writes only into a folder of its own (a new folder inside it is one)"
    )
    assert owner_problem(tmp_path, ".cache.lock", "mode=cache", FILES, beside=True) is None


def test_a_refusal_names_a_few_entries_and_counts_the_rest(tmp_path):
    """500 foreign files of the writer's names: one short line, not all of them."""
    names = frozenset(f"train-{i:06d}.tar" for i in range(500))
    for name in names:
        (tmp_path / name).write_bytes(b"")
    line = owner_problem(tmp_path, ".mark", "mode=x", names, beside=True)
    assert (
        "train-000000.tar, train-000001.tar, train-000002.tar, train-000003.tar and 496 more"
        in line
    )
    assert len(line) < 400


def test_the_runs_own_folder_is_named_as_such(tmp_path):
    """shards.dir=${paths.output_dir}: the run holds that folder's .run.lock itself."""
    folder_lock.hold(tmp_path / ".run.lock", writer="mode=shards")
    try:
        assert owner_problem(tmp_path, ".shards.lock", "mode=shards", FILES, beside=True) == (
            f"{tmp_path} is this run's own folder (its .run.lock), and mode=shards writes only "
            "into a folder of its own (a new folder inside it is one)"
        )
    finally:
        folder_lock.release(tmp_path / ".run.lock")


def test_a_mark_no_older_engine_wrote_lists_nothing_when_empty(tmp_path):
    """An empty .shards.lock (a full disk as it was first written) is no licence: the files
    of the writer's names there are not its own."""
    (tmp_path / "report.csv").write_text("a user's\n")
    (tmp_path / ".mark").write_text("")
    assert owner_problem(tmp_path, ".mark", "mode=x", FILES, old_marks=False).startswith(
        f"{tmp_path} holds report.csv, which its mark (.mark) does not list"
    )
    assert owner_problem(tmp_path, ".mark", "mode=x", FILES) is None  # an old run's empty lock
