"""The multi-label demo (data/demo/multilabel, `make data`): 1 to 3 shapes and their colour per
image, a few unlabelled, seeded and independent of the single-label demo it sits beside."""

from __future__ import annotations

import csv
import hashlib
import json
import shutil
from pathlib import Path

from PIL import Image

from engine_dev.demo import main, make_demo_data
from engine_dev.demo_multilabel import COLOURS, LABELS
from engine_dev.demo_shapes import CLASSES


def _rows(root: Path) -> list[dict[str, str]]:
    with (root / "multilabel" / "labels.csv").open(newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))


def _digests(folder: Path) -> dict[str, str]:
    return {
        str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.rglob("*"))
        if p.is_file() and p.name not in (".complete", "shards.json")  # it holds mtimes
    }


def test_small_set_lists_every_image_with_its_shapes_and_colour(tmp_path: Path) -> None:
    main(["--out", str(tmp_path), "--small"])
    rows = _rows(tmp_path)
    assert [r["split"] for r in rows] == ["train"] * 40 + ["val"] * 16  # the --small preset
    seen = set()
    for row in rows:
        labels = row["labels"].split("|") if row["labels"] else []
        shapes = [x for x in labels if x in CLASSES]
        colours = [x for x in labels if x in COLOURS]
        assert len(shapes) + len(colours) == len(labels), row  # nothing else
        assert (1 <= len(shapes) <= 3 and len(colours) == 1) or not labels, row
        assert len(set(labels)) == len(labels), row
        image = Image.open(tmp_path / "multilabel" / row["path"])
        assert image.size == (64, 64) and image.mode == "RGB"
        seen.update(labels)
    assert sorted(seen) == list(LABELS)  # every class occurs; the class list is their sorted union


def test_the_full_set_has_a_few_hundred_images_some_unlabelled(tmp_path: Path) -> None:
    make_demo_data(
        tmp_path,
        train_per_class=(1,) * len(CLASSES),
        val_per_class=1,
        sequences=5,
        shard_size=4,
    )
    rows = _rows(tmp_path)
    assert sum(r["split"] == "train" for r in rows) == 800
    assert sum(r["split"] == "val" for r in rows) == 200
    assert 0 < sum(not r["labels"] for r in rows) < 0.1 * len(rows)


def test_same_seed_same_files_and_the_single_label_demo_is_untouched(tmp_path: Path) -> None:
    params = {
        "train_per_class": (3, 3, 2, 2, 2),
        "val_per_class": 2,
        "shard_size": 4,
        "sequences": 10,
    }
    a = _digests(make_demo_data(tmp_path / "a", multilabel_train=8, multilabel_val=4, **params))
    b = _digests(make_demo_data(tmp_path / "b", multilabel_train=8, multilabel_val=4, **params))
    assert a == b
    other = make_demo_data(tmp_path / "c", multilabel_train=12, multilabel_val=2, **params)
    c = _digests(other)
    single = [p for p in a if not p.startswith("multilabel/")]
    assert {p: c[p] for p in single} == {p: a[p] for p in single}  # other multi-label counts
    reseeded = make_demo_data(
        tmp_path / "d", multilabel_train=8, multilabel_val=4, seed=1, **params
    )
    assert _digests(reseeded / "multilabel") != _digests(tmp_path / "a" / "multilabel")


def test_make_data_regenerates_a_demo_written_before_the_multilabel_set(tmp_path, capsys) -> None:
    main(["--out", str(tmp_path), "--small"])
    marker = tmp_path / ".complete"
    stamp = json.loads(marker.read_text("utf-8"))
    marker.write_text(json.dumps(stamp | {"format_version": 3}, sort_keys=True), "utf-8")
    shutil.rmtree(tmp_path / "multilabel")  # what a format-3 demo lacks
    capsys.readouterr()
    main(["--out", str(tmp_path), "--small"])
    assert "Wrote demo data" in capsys.readouterr().out
    assert len(_rows(tmp_path)) == 56
    main(["--out", str(tmp_path), "--small"])
    assert "already in" in capsys.readouterr().out
