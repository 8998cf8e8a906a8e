"""A multi-label model end to end: trained one epoch on a tiny `a|b` CSV, mode=eval writes
per_class.csv (support = the labels counted in the CSV), hardest.csv and map / f1 /
subset_acc without a confusion matrix, mode=predict writes path,labels,scores whose labels
agree with the scores and the threshold, and load_model labels a batch the same way."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image

from engine.api import load_model
from engine.modes.evaluation import evaluate_checkpoint
from engine.modes.prediction import predict
from src.loop import train
from tests import checkpoint_configs
from tests.cli import run_cli
from tests.conftest import compose_config

on_checkpoint = checkpoint_configs.on_checkpoint  # a fixture (mode=eval, predict configs)

CLASSES = ["a", "b", "c"]
TRAIN = (
    "dataset=csv",
    "dataset.multi_label=true",
    "loss=bce",
    "metrics=multilabel",
    "model=mlp",
    "model.hidden=[16]",
    "trainer.max_epochs=1",
)


def _rows(path: Path) -> list[dict[str, str]]:
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def _labels(cell: str) -> list[str]:
    return cell.split("|") if cell else []


def _scores(cell: str) -> dict[str, float]:
    return {name: float(s) for name, s in (item.rsplit(":", 1) for item in cell.split("|"))}


@pytest.fixture(scope="module")
def listing(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """listing.csv (path,label,split) of 24 train and 12 val PNGs; sample i is labelled with
    the classes of i's bits (0: none, 3: a|b, 7: a|b|c)."""
    root = tmp_path_factory.mktemp("listing")
    rng = np.random.default_rng(0)
    lines = ["path,label,split"]
    for split, count in (("train", 24), ("val", 12)):
        for i in range(count):
            name = f"{split}_{i:02d}.png"
            Image.fromarray(rng.integers(0, 256, (20, 20, 3), dtype=np.uint8)).save(root / name)
            labels = "|".join(c for k, c in enumerate(CLASSES) if (i >> k) & 1)
            lines.append(f"{name},{labels},{split}")
    (root / "listing.csv").write_text("\n".join(lines) + "\n")
    return root / "listing.csv"


@pytest.fixture(scope="module")
def trained(demo_dir: Path, listing: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    run = tmp_path_factory.mktemp("multi_label") / "run"
    train(compose_config(demo_dir, run, *TRAIN, f"dataset.csv={listing}"))
    return run


def test_eval_writes_per_class_hardest_and_map_without_a_confusion_matrix(
    trained: Path, listing: Path, on_checkpoint, tmp_path: Path
) -> None:
    results = evaluate_checkpoint(on_checkpoint("mode=eval", f"eval.checkpoint={trained}"))
    out = tmp_path / "out"
    assert {"val/map", "val/f1", "val/subset_acc", "val/loss"} <= set(results)
    assert "val/acc" not in results
    assert json.loads((out / "metrics.json").read_text()) == pytest.approx(results)
    history = _rows(trained / "history.csv")[-1]  # one epoch: best.pt is its weights
    assert results["val/loss"] == pytest.approx(float(history["val/loss"]), rel=1e-5)
    assert not (out / "confusion.csv").exists() and not (out / "confusion.png").exists()

    val = [r for r in _rows(listing) if r["split"] == "val"]
    per_class = _rows(out / "per_class.csv")
    assert list(per_class[0]) == ["class", "AP", "F1", "precision", "recall", "support"]
    assert [r["class"] for r in per_class] == CLASSES
    counted = {c: sum(c in _labels(r["label"]) for r in val) for c in CLASSES}
    assert {r["class"]: int(r["support"]) for r in per_class} == counted == {"a": 6, "b": 6, "c": 4}
    mean_ap = sum(float(r["AP"]) for r in per_class) / 3  # every class has positives
    assert results["val/map"] == pytest.approx(mean_ap)
    assert results["val/f1"] == pytest.approx(sum(float(r["F1"]) for r in per_class) / 3)

    hardest = _rows(out / "hardest.csv")
    assert list(hardest[0]) == ["path", "labels", "predicted", "loss", "scores"]
    assert len(hardest) == 12
    assert [float(r["loss"]) for r in hardest] == sorted(
        (float(r["loss"]) for r in hardest), reverse=True
    )
    truth = {r["path"]: r["label"] for r in val}
    right = 0
    for row in hardest:
        assert row["labels"] == truth[Path(row["path"]).name]
        scores = _scores(row["scores"])
        assert _labels(row["predicted"]) == [c for c in CLASSES if scores[c] >= 0.5]
        right += row["labels"] == row["predicted"]
    assert results["val/subset_acc"] == pytest.approx(right / 12)


def test_eval_at_another_threshold(trained: Path, on_checkpoint, tmp_path: Path) -> None:
    results = evaluate_checkpoint(
        on_checkpoint("mode=eval", f"eval.checkpoint={trained}", "eval.threshold=0.0")
    )
    per_class = _rows(tmp_path / "out" / "per_class.csv")
    assert [float(r["recall"]) for r in per_class] == [1.0, 1.0, 1.0]  # every class predicted
    assert [float(r["precision"]) for r in per_class] == pytest.approx([6 / 12, 6 / 12, 4 / 12])
    assert results["val/subset_acc"] == pytest.approx(1 / 12)  # only sample 7 (a|b|c)


def test_predict_labels_every_class_above_the_threshold(
    trained: Path, listing: Path, on_checkpoint, tmp_path: Path
) -> None:
    given = (f"predict.checkpoint={trained}", f"predict.input={listing}")
    model = load_model(trained)
    assert model.multi_label and model.classes == CLASSES and model.labeller.threshold == 0.5
    for extra, threshold in (
        ((), 0.5),
        (("predict.threshold=0.45",), 0.45),
        (("+metrics.threshold=0.55",), 0.55),  # the checkpoint's metrics.threshold replaced
    ):
        metrics = predict(on_checkpoint("mode=predict", *given, *extra))
        rows = _rows(tmp_path / "out" / "predictions.csv")
        assert list(rows[0]) == ["path", "labels", "scores"]
        assert len(rows) == 36 and metrics["predict/samples"] == 36.0
        for row in rows:
            scores = _scores(row["scores"])
            assert list(scores) == CLASSES
            assert _labels(row["labels"]) == [c for c in CLASSES if scores[c] > threshold]
        # the same labels and sigmoid scores in a notebook
        model.labeller.threshold = threshold
        labels, scores = model.predict(model.preprocess([Path(r["path"]) for r in rows[:6]]))
        assert labels == [_labels(r["labels"]) for r in rows[:6]]
        expected = torch.tensor([list(_scores(r["scores"]).values()) for r in rows[:6]])
        assert torch.allclose(scores, expected, atol=1e-6)
    with pytest.raises(ValueError, match=r"predict\.top_k=2: .* is multi-label"):
        predict(on_checkpoint("mode=predict", *given, "predict.top_k=2"))


def test_eval_of_a_multi_label_model_from_the_command_line(trained: Path, tmp_path: Path) -> None:
    result = run_cli(
        "mode=eval",
        f"eval.checkpoint={trained}",
        "eval.hardest=3",
        f"paths.log_dir={tmp_path}",
        f"hydra.run.dir={tmp_path / 'eval'}",
        cwd=tmp_path,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert "no confusion.csv/.png" in result.stdout
    assert len(_rows(tmp_path / "eval" / "hardest.csv")) == 3


def test_eval_rebuilds_a_balanced_pos_weight_from_the_checkpoint(
    demo_dir: Path, listing: Path, on_checkpoint, tmp_path: Path
) -> None:
    lines = listing.read_text().splitlines()  # a, b on 11 of 21 train samples, c on 9
    kept = [line for line in lines if not line.startswith(("train_04", "train_05", "train_06"))]
    uneven = listing.with_name("uneven.csv")
    uneven.write_text("\n".join(kept) + "\n")
    run = tmp_path / "balanced"
    train(
        compose_config(demo_dir, run, *TRAIN, f"dataset.csv={uneven}", "loss.pos_weight=balanced")
    )
    results = evaluate_checkpoint(on_checkpoint("mode=eval", f"eval.checkpoint={run}"))
    history = _rows(run / "history.csv")[-1]
    assert results["val/loss"] == pytest.approx(float(history["val/loss"]), rel=1e-5)
    plain = evaluate_checkpoint(
        on_checkpoint("mode=eval", f"eval.checkpoint={run}", "loss=bce")  # pos_weight null
    )
    assert plain["val/loss"] != pytest.approx(results["val/loss"], rel=1e-3)  # the weights count
