"""The writers (mode=cache, mode=shards in both formats) remove and replace only files they
wrote themselves, as their folder's mark (engine/core/folder_mark.py) records them, or an
earlier engine's own records (a manifest's or footer's `written_by`), wherever the data came
from: a folder a CSV dataset reads from is refused as an output, and a user's files of the
writers' names (manifest.json, classes.txt, train-000000.tar, a Hugging Face Parquet set) are
never replaced, with or without cache.rebuild / shards.overwrite (nor through a linked folder);
an output folder that is a link to nothing or a file is one line naming the key."""

from __future__ import annotations

import errno
import fcntl
import json
import shutil
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from omegaconf import DictConfig, OmegaConf

from engine import __version__
from engine.core.io import output_folder
from engine.data.cache_store import CacheWriter
from engine.data.datasets.cache import CachedImages
from engine.data.shards.writer import unfinished_write, writing
from engine.modes.cache import cache
from engine.modes.shards import shards

USERS = "the user's own"
TRAIN_SAMPLES = 48  # the test demo set's train split


@pytest.fixture
def csv_data(demo_dir: Path, tmp_path: Path) -> Path:
    """A CSV dataset whose listings sit beside its images' folders (data/train/*.png), with
    the user's own train/manifest.json and classes.txt among them."""
    data = tmp_path / "data"
    for split in ("train", "val"):
        (data / split).mkdir(parents=True)
        rows = ["path,label"]
        classes = sorted((demo_dir / "imagefolder" / split).iterdir())
        sources = [sorted(folder.iterdir())[0] for folder in classes]
        for i, source in enumerate(sources):
            shutil.copy(source, data / split / f"{i}{source.suffix}")
            rows.append(f"{split}/{i}{source.suffix},{source.parent.name}")
        (data / f"{split}.csv").write_text("\n".join(rows) + "\n")
    (data / "train" / "manifest.json").write_text(USERS)
    (data / "classes.txt").write_text(USERS)
    return data


def _csv(data: Path) -> tuple[str, ...]:
    return ("dataset=csv", f"dataset.train_csv={data}/train.csv", f"dataset.val_csv={data}/val.csv")


@pytest.mark.parametrize("mode", ["cache", "shards"])
def test_an_output_folder_a_csv_dataset_reads_from_is_refused(reference_cfg, csv_data, mode):
    """dataset.root is null for a CSV: the CSV files' folder and the images' are the data."""
    write = cache if mode == "cache" else shards
    extra = ("cache.rebuild=true",) if mode == "cache" else ("shards.overwrite=true",)
    for inside, named in ((csv_data, "the folder of dataset.train_csv"), (csv_data / "val", "")):
        cfg = reference_cfg(mode, f"mode={mode}", *_csv(csv_data), f"{mode}.dir={inside}", *extra)
        with pytest.raises(ValueError, match=rf"{mode}\.dir={inside} is inside .*{named}"):
            write(cfg)
    assert (csv_data / "train" / "manifest.json").read_text() == USERS
    assert (csv_data / "classes.txt").read_text() == USERS
    assert not (csv_data / "train" / "progress.json").exists()
    assert all(p.suffix in (".png", ".jpg") for p in (csv_data / "val").iterdir())


@pytest.mark.parametrize("mode", ["cache", "shards"])
def test_an_output_folder_inside_the_dataset_root_is_refused(reference_cfg, demo_dir, mode):
    root = demo_dir / "imagefolder"
    inside = root / "train"
    write = cache if mode == "cache" else shards
    with pytest.raises(ValueError, match=rf"{mode}.dir={inside} is inside dataset.root={root}"):
        write(reference_cfg(mode, f"mode={mode}", f"{mode}.dir={inside}"))


@pytest.mark.parametrize("mode", ["cache", "shards"])
def test_an_output_folder_that_is_a_link_to_nothing_or_a_file_is_one_line(
    reference_cfg, tmp_path, mode
) -> None:
    dangling, file = tmp_path / "dangling", tmp_path / "file"
    dangling.symlink_to(tmp_path / "nowhere")
    file.write_text("x")
    write = cache if mode == "cache" else shards
    with pytest.raises(FileNotFoundError, match=rf"{mode}.dir={dangling}: a symbolic link to .*"):
        write(reference_cfg(mode, f"mode={mode}", f"{mode}.dir={dangling}"))
    with pytest.raises(NotADirectoryError, match=rf"{mode}.dir={file} is a file, not a folder"):
        write(reference_cfg(mode, f"mode={mode}", f"{mode}.dir={file}"))
    assert not (tmp_path / "nowhere").exists()


@pytest.mark.parametrize("rebuild", [False, True])
def test_a_cache_never_replaces_a_file_it_did_not_write(tmp_path, rebuild) -> None:
    """A manifest.json that is not a cache's, or a cache's file name with no cache manifest
    beside it, is someone else's: refused naming it, also with cache.rebuild."""
    for name in ("manifest.json", "index.i64"):
        folder = tmp_path / name
        folder.mkdir()
        (folder / name).write_text(USERS)
        with pytest.raises(FileExistsError, match=rf"cache\.dir: {folder} holds a {name}"):
            CacheWriter(folder, [], {"encoding": "raw"}, ["a"], rebuild)
        assert [p.read_text() for p in folder.iterdir()] == [USERS]


def test_rebuild_removes_only_the_caches_own_files_also_through_a_link(reference_cfg, tmp_path):
    cached, elsewhere = tmp_path / "cache", tmp_path / "elsewhere"
    elsewhere.mkdir()
    cached.mkdir()
    (cached / "train").symlink_to(elsewhere, target_is_directory=True)
    (elsewhere / "notes.txt").write_text(USERS)
    args = ("mode=cache", f"cache.dir={cached}", "cache.short_side=32")
    cache(reference_cfg("a", *args))
    first = (elsewhere / "pixels.u8").read_bytes()
    cache(reference_cfg("b", *args, "cache.rebuild=true"))
    assert (elsewhere / "notes.txt").read_text() == USERS
    assert (elsewhere / "pixels.u8").read_bytes() == first
    assert len(CachedImages(str(cached), "train")) == TRAIN_SAMPLES


def test_rebuild_and_resume_still_replace_the_caches_own_files(tmp_path) -> None:
    settings = {"encoding": "raw", "short_side": 4, "jpeg_quality": None}
    image = tmp_path / "a.png"
    image.write_bytes(b"x")
    writer = CacheWriter(tmp_path / "c", [str(image)], settings, ["a"], rebuild=False)
    writer.close()  # cut before its first image: a rerun resumes it
    CacheWriter(tmp_path / "c", [str(image)], settings, ["a"], rebuild=False).close()
    CacheWriter(tmp_path / "c", [str(image)], settings, ["a"], rebuild=True).close()
    assert (tmp_path / "c" / "manifest.json").is_file()


@pytest.mark.parametrize("taken", ["classes.txt", "train-000000.tar", "shards.json"])
def test_shards_never_replace_a_file_no_shard_write_recorded(
    reference_cfg, csv_data, tmp_path, taken
):
    """A folder holding a user's classes.txt (or tar, or a manifest another writer made) is
    refused in one line that does not offer shards.overwrite, which would replace it."""
    out = tmp_path / "out"
    out.mkdir()
    (out / taken).write_text(USERS)
    for extra in ((), ("shards.overwrite=true",)):
        cfg = reference_cfg("s", "mode=shards", *_csv(csv_data), f"shards.dir={out}", *extra)
        with pytest.raises(
            FileExistsError,
            match=rf"{out} holds {taken}, which no \.shards\.lock there lists as written by mode=shards",
        ):
            shards(cfg)
    assert [p.name for p in out.iterdir()] == [taken] and (out / taken).read_text() == USERS


@pytest.mark.parametrize("fmt", ["tar", "parquet"])
def test_shards_overwrite_replaces_their_own_set(reference_cfg, csv_data, tmp_path, fmt) -> None:
    out = tmp_path / "out"
    args = ("mode=shards", *_csv(csv_data), f"shards.dir={out}", f"shards.format={fmt}")
    shards(reference_cfg("a", *args))
    written = sorted(p.name for p in out.iterdir())
    with pytest.raises(FileExistsError, match=r"already holds shards .*shards\.overwrite=true"):
        shards(reference_cfg("b", *args))
    shards(reference_cfg("c", *args, "shards.overwrite=true"))
    assert sorted(p.name for p in out.iterdir()) == written


def test_overwrite_replaces_only_the_shard_writers_own_files(reference_cfg, tmp_path) -> None:
    """A folder of the user's files named like shards (and no shards) is written into; a
    smaller set written over a larger one with shards.overwrite leaves none of the old shards
    and every one of the user's files."""
    out = tmp_path / "shards"
    out.mkdir()
    mine = ["train-notes.tar.txt", "val-backup.tar.bak", "train-1.tar", "notes.md"]
    for name in mine:
        (out / name).write_text(USERS)
    args = ("mode=shards", f"shards.dir={out}")
    shards(reference_cfg("a", *args, "shards.max_samples=16"))
    assert sorted(p.name for p in out.glob("train-0*")) == [f"train-00000{i}.tar" for i in range(3)]
    with pytest.raises(FileExistsError, match=r"already holds shards \(classes.txt|train-0"):
        shards(reference_cfg("b", *args, "shards.max_samples=16"))
    shards(reference_cfg("c", *args, "shards.overwrite=true", "shards.max_samples=100"))
    assert all((out / name).read_text() == USERS for name in mine)
    assert sorted(p.name for p in out.glob("train-0*")) == ["train-000000.tar"]


def test_a_hugging_face_parquet_set_of_the_same_names_is_not_replaced(
    reference_cfg, csv_data, tmp_path
) -> None:
    """A downloaded set named train-00000-of-00001.parquet has no mark of this writer."""
    out = tmp_path / "hub"
    out.mkdir()
    name = "train-00000-of-00001.parquet"
    pq.write_table(pa.table({"image": [b"x"], "label": [0]}), out / name)
    held = (out / name).read_bytes()
    args = ("mode=shards", *_csv(csv_data), "shards.format=parquet", "shards.overwrite=true")
    with pytest.raises(
        FileExistsError,
        match=rf"{out} holds {name}, which no \.shards\.lock there lists as written by mode=shards",
    ):
        shards(reference_cfg("b", *args, f"shards.dir={out}"))
    assert (out / name).read_bytes() == held


def _stream(cfg: DictConfig, shards_dir: Path, train: str, val: str) -> DictConfig:
    """`cfg` reading the tar shards in `shards_dir` as a stream (dataset=iterable's dataset,
    which the reference project has no config for)."""
    cfg.dataset = OmegaConf.create(
        {
            "_target_": "engine.data.datasets.tar_shards.TarShardDataset",
            "train_shards": f"{shards_dir}/{train}",
            "val_shards": f"{shards_dir}/{val}",
        }
    )
    return cfg


@pytest.mark.parametrize(
    "train, val",
    [("train-*.tar", "val-*.tar"), ("train-{000000..000002}.tar", "val-000000.tar")],
)
def test_shards_dir_the_stream_reads_from_is_refused_before_anything_is_removed(
    reference_cfg, demo_dir, tmp_path, train, val
) -> None:
    """mode=shards shards.overwrite=true over the shards dataset.train_shards names (a glob or
    a brace range) would delete them before reading them: refused, every file left as it was."""
    source = tmp_path / "s"
    shutil.copytree(demo_dir / "shards", source)
    before = {p.name: p.read_bytes() for p in source.iterdir()}
    args = ("mode=shards", f"shards.dir={source}", "shards.overwrite=true")
    cfg = _stream(reference_cfg("run", *args), source, train, val)
    with pytest.raises(
        ValueError, match=rf"shards\.dir={source} is inside .*dataset\.train_shards"
    ):
        shards(cfg)
    assert {p.name: p.read_bytes() for p in source.iterdir()} == before


@pytest.mark.parametrize("mode", ["cache", "shards"])
def test_a_stream_is_refused_by_the_writers_in_one_line_before_writing(
    reference_cfg, demo_dir, tmp_path, mode
) -> None:
    """A stream (dataset=iterable) has no samples by index: mode=cache / mode=shards say so
    and what to do instead, and write nothing."""
    write = cache if mode == "cache" else shards
    out = tmp_path / "out"
    cfg = reference_cfg(mode, f"mode={mode}", f"{mode}.dir={out}")
    cfg = _stream(cfg, demo_dir / "shards", "train-*.tar", "val-*.tar")
    with pytest.raises(ValueError, match=rf"mode={mode}: the train split .* is a stream") as err:
        write(cfg)
    assert "dataset=imagefolder" in str(err.value) and "\n" not in str(err.value)
    assert not out.exists()


def _class_folders(demo_dir: Path, into: Path) -> Path:
    """The demo's train class folders copied into `into` (a root read with val_fraction)."""
    shutil.copytree(demo_dir / "imagefolder" / "train", into)
    return into


@pytest.mark.parametrize("below", ["train", "train/sub"])
def test_a_cache_dir_whose_split_folder_is_or_holds_the_data_is_refused(
    reference_cfg, demo_dir, tmp_path, below
) -> None:
    """cache.dir=X writes X/train and X/val: with dataset.root=X/train (or deeper) the cache's
    files would land among the user's class folders."""
    root = _class_folders(demo_dir, tmp_path / "x" / below)
    before = sorted(p.name for p in root.iterdir())
    args = (f"dataset.root={root}", "dataset.val_fraction=0.25", f"cache.dir={tmp_path / 'x'}")
    where = "is inside" if below == "train" else "holds"
    with pytest.raises(ValueError, match=rf"\(its train/ folder\) {where} dataset\.root={root}"):
        cache(reference_cfg("c", "mode=cache", *args))
    assert sorted(p.name for p in root.iterdir()) == before


def test_a_folder_above_the_data_but_outside_what_the_writer_fills_is_allowed(
    reference_cfg, demo_dir, tmp_path
) -> None:
    """cache.dir=/data with the images in /data/raw/imgs: the cache's train/ and val/ are
    beside them, nothing mixes."""
    root = _class_folders(demo_dir, tmp_path / "data" / "raw" / "imgs")
    args = (f"dataset.root={root}", "dataset.val_fraction=0.25", "cache.short_side=8")
    cache(reference_cfg("c", "mode=cache", *args, f"cache.dir={tmp_path / 'data'}"))
    assert (tmp_path / "data" / "train" / "manifest.json").exists()
    assert (tmp_path / "data" / "raw" / "imgs").is_dir()


@pytest.mark.parametrize("fmt", ["tar", "parquet", "cache"])
def test_each_writer_marks_its_folder_with_writer_version_and_the_files_it_wrote(
    reference_cfg, tmp_path, fmt
) -> None:
    out = tmp_path / "out"
    if fmt == "cache":
        cache(reference_cfg("a", "mode=cache", f"cache.dir={out}", "cache.short_side=8"))
        written = {
            f"{split}/{p.name}" for split in ("train", "val") for p in (out / split).iterdir()
        }
    else:
        shards(reference_cfg("a", "mode=shards", f"shards.dir={out}", f"shards.format={fmt}"))
        written = {p.name for p in out.glob("[!.]*")}
    mark = json.loads((out / f".{'cache' if fmt == 'cache' else 'shards'}.lock").read_text())
    assert mark["writer"] == f"mode={'cache' if fmt == 'cache' else 'shards'}"
    assert mark["version"] == __version__ and written <= set(mark["files"])
    assert not (out / "shards.writing").exists()  # mode=shards': the set is whole


def _as_an_earlier_engine_left_it(out: Path, fmt: str) -> None:
    """`out`'s set as an earlier engine wrote it: no .shards.lock, its own records in the
    manifest (`written_by`) or in each Parquet file's footer."""
    (out / ".shards.lock").unlink()
    if fmt == "tar":
        manifest = json.loads((out / "shards.json").read_text())
        (out / "shards.json").write_text(json.dumps({**manifest, "written_by": "mode=shards"}))
        return
    for path in out.glob("*.parquet"):
        table = pq.read_table(path)
        metadata = {**(table.schema.metadata or {}), b"written_by": b"mode=shards"}
        pq.write_table(table.replace_schema_metadata(metadata), path)


@pytest.mark.parametrize("fmt", ["tar", "parquet"])
def test_a_set_an_earlier_engine_wrote_is_still_the_writers_own(
    reference_cfg, tmp_path, fmt
) -> None:
    """Sets written before shards.dir had a mark: their own records make them mode=shards',
    so a rerun is told to overwrite, and overwrite replaces them (and marks the folder)."""
    out = tmp_path / "out"
    args = ("mode=shards", f"shards.dir={out}", f"shards.format={fmt}")
    shards(reference_cfg("a", *args))
    _as_an_earlier_engine_left_it(out, fmt)
    with pytest.raises(FileExistsError, match=r"already holds shards .*shards\.overwrite=true"):
        shards(reference_cfg("b", *args))
    shards(reference_cfg("c", *args, "shards.overwrite=true"))
    assert json.loads((out / ".shards.lock").read_text())["writer"] == "mode=shards"


def test_a_write_an_earlier_engine_cut_short_is_unfinished_until_overwritten(
    reference_cfg, tmp_path
) -> None:
    """An earlier engine's kill -9 left `shards.writing` (its lock, recording the planned
    files) and no manifest: readers and a rerun say the set is unfinished; overwrite replaces
    it and the old lock."""
    out = tmp_path / "out"
    args = ("mode=shards", f"shards.dir={out}", "shards.max_samples=16")
    shards(reference_cfg("a", *args))
    planned = sorted(p.name for p in out.glob("[!.]*"))
    for name in (".shards.lock", "shards.json"):
        (out / name).unlink()
    (out / "shards.writing").write_text(json.dumps({"pid": 1, "writes": planned}))
    assert "holds an unfinished set of shards" in unfinished_write(out)
    with pytest.raises(FileExistsError, match=r"already holds an unfinished set of shards"):
        shards(reference_cfg("b", *args))
    shards(reference_cfg("c", *args, "shards.overwrite=true"))
    assert not (out / "shards.writing").exists() and unfinished_write(out) is None


def test_a_writer_refuses_a_folder_another_writer_marked(reference_cfg, tmp_path) -> None:
    """shards.dir set to a cache.dir (and back): the folder's mark names its owner, and
    neither writer's files land among the other's."""
    cached, out = tmp_path / "cache", tmp_path / "shards"
    cache(reference_cfg("a", "mode=cache", f"cache.dir={cached}", "cache.short_side=8"))
    shards(reference_cfg("b", "mode=shards", f"shards.dir={out}"))
    before = sorted(p.name for p in cached.iterdir())
    with pytest.raises(FileExistsError, match=rf"shards.dir: {cached} is the folder of mode=cache"):
        shards(reference_cfg("c", "mode=shards", f"shards.dir={cached}"))
    with pytest.raises(FileExistsError, match=rf"cache.dir: {out} is the folder of mode=shards"):
        cache(reference_cfg("d", "mode=cache", f"cache.dir={out}"))
    assert sorted(p.name for p in cached.iterdir()) == before


def test_the_mark_lists_the_last_sets_files_so_a_later_file_of_an_old_name_is_the_users(
    reference_cfg, tmp_path
) -> None:
    """A smaller set written over a larger one: the mark lists the files there now, so a user's
    file given a name the larger set had is refused, never taken for the writer's; a hand
    edit listing a user's file of another name does not make the writer remove it."""
    out = tmp_path / "out"
    args = ("mode=shards", f"shards.dir={out}")
    shards(reference_cfg("a", *args, "shards.max_samples=8"))
    shards(reference_cfg("b", *args, "shards.max_samples=100", "shards.overwrite=true"))
    (out / "train-000005.tar").write_text(USERS)
    with pytest.raises(FileExistsError, match=r"holds train-000005.tar, which its mark"):
        shards(reference_cfg("c", *args, "shards.max_samples=100", "shards.overwrite=true"))
    (out / "train-000005.tar").unlink()
    mark = json.loads((out / ".shards.lock").read_text())
    (out / "notes.txt").write_text(USERS)
    (out / ".shards.lock").write_text(json.dumps({**mark, "files": [*mark["files"], "notes.txt"]}))
    shards(reference_cfg("d", *args, "shards.overwrite=true"))
    assert (out / "notes.txt").read_text() == USERS


def test_tar_and_parquet_sets_share_a_folder_and_each_replaces_only_its_own(
    reference_cfg, tmp_path
) -> None:
    """The default shards.dir written in both formats (make shards, then format=parquet): the
    second sits beside the first, also when the first is an earlier engine's set, and an
    overwrite of one leaves the other."""
    out = tmp_path / "out"
    tar, parquet = ("mode=shards", f"shards.dir={out}"), ("shards.format=parquet",)
    shards(reference_cfg("a", *tar))
    _as_an_earlier_engine_left_it(out, "tar")
    shards(reference_cfg("b", *tar, *parquet))
    both = sorted(p.name for p in out.glob("[!.]*"))
    assert any(n.endswith(".tar") for n in both) and any(n.endswith(".parquet") for n in both)
    shards(reference_cfg("c", *tar, "shards.overwrite=true"))
    shards(reference_cfg("d", *tar, *parquet, "shards.overwrite=true"))
    assert sorted(p.name for p in out.glob("[!.]*")) == both


def test_a_cut_write_stays_unfinished_in_a_copy_and_a_stray_flag_is_cleared_by_overwrite(
    reference_cfg, tmp_path
) -> None:
    """A write that fails leaves `shards.writing`, a plain file a `cp dir/*` takes along; an
    overwrite clears it, also one left beside a finished, marked set."""
    out, copy = tmp_path / "out", tmp_path / "copy"
    with (
        pytest.raises(RuntimeError, match="cut"),
        writing(output_folder(out, "shards.dir"), False, ["train-000000.tar"]),
    ):
        (out / "train-000000.tar").write_bytes(b"")
        raise RuntimeError("cut")
    copy.mkdir()
    for path in out.glob("[!.]*"):
        shutil.copy(path, copy / path.name)
    assert "holds an unfinished set of shards" in unfinished_write(copy)
    args = ("mode=shards", f"shards.dir={out}")
    shards(reference_cfg("a", *args, "shards.overwrite=true"))
    (out / "shards.writing").write_text("{}")
    assert "unfinished" in unfinished_write(out)
    shards(reference_cfg("b", *args, "shards.overwrite=true"))
    assert unfinished_write(out) is None


def test_shards_write_where_the_file_system_has_no_flock(reference_cfg, tmp_path, monkeypatch):
    """A network mount without flock: the lock is not taken (a warning says so), and the mark
    still names the writer and its files, and the set ends whole."""
    real = fcntl.flock

    def no_exclusive_lock(fd: int, op: int) -> None:
        if op & fcntl.LOCK_EX:
            raise OSError(errno.ENOLCK, "No locks available")
        real(fd, op)

    monkeypatch.setattr(fcntl, "flock", no_exclusive_lock)
    out = tmp_path / "out"
    shards(reference_cfg("a", "mode=shards", f"shards.dir={out}"))
    mark = json.loads((out / ".shards.lock").read_text())
    assert mark["writer"] == "mode=shards" and "shards.json" in mark["files"]
    assert unfinished_write(out) is None


def test_an_empty_mark_a_full_disk_left_makes_no_users_file_the_writers(
    reference_cfg, tmp_path
) -> None:
    """A Hub set (no mark of this writer) beside the empty .shards.lock of a claim cut short
    by a full disk: refused, also with shards.overwrite, naming the files and the way out."""
    out = tmp_path / "hub"
    out.mkdir()
    name = "train-00000-of-00001.parquet"
    pq.write_table(pa.table({"image": [b"x"], "label": [0]}), out / name)
    (out / ".shards.lock").write_text("")
    held = (out / name).read_bytes()
    args = ("mode=shards", "shards.format=parquet", "shards.overwrite=true")
    with pytest.raises(FileExistsError, match=rf"holds {name}, which its mark .* remove those"):
        shards(reference_cfg("a", *args, f"shards.dir={out}"))
    assert (out / name).read_bytes() == held


@pytest.mark.parametrize("cut, then", [("parquet", "tar"), ("tar", "parquet")])
def test_an_overwrite_in_the_other_format_replaces_the_whole_unfinished_set(
    reference_cfg, tmp_path, cut, then
) -> None:
    """A write cut short leaves files of its format and the flag; an overwrite in the other
    format removes them too, so no reader takes the half set for a whole one."""
    out = tmp_path / "out"
    args = ("mode=shards", f"shards.dir={out}", "shards.max_samples=16")
    shards(reference_cfg("a", *args, f"shards.format={cut}"))
    first = sorted(p.name for p in out.glob("[!.]*"))
    (out / "shards.writing").write_text("{}")  # as a kill -9 of that write leaves it
    with pytest.raises(FileExistsError, match=r"already holds an unfinished set of shards"):
        shards(reference_cfg("b", *args, f"shards.format={then}"))
    shards(reference_cfg("c", *args, f"shards.format={then}", "shards.overwrite=true"))
    assert not set(first) & {p.name for p in out.iterdir()} - {"classes.txt", "shards.json"}
    assert unfinished_write(out) is None
