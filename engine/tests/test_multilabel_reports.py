"""Multi-label eval reports and predictions on hand-made logits: per-class AP / F1 / precision /
recall / support, the split's map / f1 / subset_acc, hardest.csv's losses, and predictions.csv
read back with the csv module; a score exactly at the threshold is not a label (as in the
training's torchmetrics F1, and the template's subset accuracy: its tests/test_multilabel.py)."""

from __future__ import annotations

import csv
import math
from pathlib import Path

import pytest
import torch
from torchmetrics.functional.classification import multilabel_average_precision

from engine.config.errors import ConfigError
from engine.core.io import write_csv
from engine.inference import multilabel_reports
from engine.inference.labeller import Labeller
from engine.inference.passes import Outputs
from engine.modes.prediction import MULTI_LABEL_COLUMNS, multi_label_rows
from engine.sweeps.summary import headline

CLASSES = ["a", "b", "c"]
# logit 0.1 is a sigmoid score just above 0.5, so labelled at the threshold 0.5
LOGITS = torch.tensor([[2.0, -2.0, -3.0], [0.1, -1.0, -2.0], [-1.0, 3.0, 0.1], [1.0, -2.0, -3.0]])
TARGETS = torch.tensor([[1, 0, 0], [1, 1, 0], [0, 1, 0], [0, 0, 0]], dtype=torch.float32)
# predicted: a for samples 0, 1, 3; b and c for sample 2 -> a: tp 2 fp 1 fn 0; b: tp 1 fn 1;
# c: no positives, one false positive
OUTPUTS = Outputs(LOGITS, TARGETS, torch.tensor([10, 11, 12, 13]))
LABELLER = Labeller(CLASSES, multi_label=True, threshold=0.5)


def _read(path: Path) -> list[dict[str, str]]:
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


@pytest.mark.filterwarnings("ignore:No positive samples found:UserWarning")  # the reference
def test_per_class_rows_hold_hand_counted_values_and_torchmetrics_ap() -> None:
    rows = {r["class"]: r for r in multilabel_reports.per_class(OUTPUTS, LABELLER)}
    assert rows["a"] | {"AP": None} == {
        "class": "a", "AP": None, "F1": pytest.approx(0.8), "precision": pytest.approx(2 / 3),
        "recall": 1.0, "support": 2,
    }  # fmt: skip
    assert (rows["b"]["precision"], rows["b"]["recall"], rows["b"]["support"]) == (1.0, 0.5, 2)
    assert rows["b"]["F1"] == pytest.approx(2 / 3)
    # a: ranked 0 (+), 3, 1 (+), 2 -> (1 + 2/3) / 2; b: both positives ranked first -> 1
    assert (rows["a"]["AP"], rows["b"]["AP"]) == (pytest.approx(5 / 6), pytest.approx(1.0))
    library = multilabel_average_precision(LOGITS.sigmoid(), TARGETS.long(), 3, average=None)
    assert rows["a"]["AP"] == pytest.approx(float(library[0]))
    # c: no positive sample, so no AP or recall; its one prediction is a false positive
    assert rows["c"] == {
        "class": "c", "AP": None, "F1": 0.0, "precision": 0.0, "recall": None, "support": 0
    }  # fmt: skip


@pytest.mark.filterwarnings("ignore:No positive samples found:UserWarning")  # the reference
def test_summary_is_the_macro_map_and_f1_and_the_exact_match_share(caplog) -> None:
    summary = multilabel_reports.summary(OUTPUTS, LABELLER, "test")
    # class c has no positive sample: said in the engine's words, AP 0 in the macro average
    assert "test: 1 class(es) have no positive sample (c): each counts as AP 0" in caplog.text
    macro_ap = float(multilabel_average_precision(LOGITS.sigmoid(), TARGETS.long(), 3))
    assert summary == {
        "test/map": pytest.approx(macro_ap),
        "test/f1": pytest.approx((0.8 + 2 / 3 + 0.0) / 3),
        "test/subset_acc": 0.25,  # only sample 0's labels are exactly right
    }


def test_a_score_exactly_at_the_threshold_is_not_a_label_as_in_training() -> None:
    logits = torch.tensor([[0.0, 1.0]])
    labels, scores = Labeller(["a", "b"], multi_label=True, threshold=0.5).decode(logits)
    assert scores[0, 0].item() == 0.5 and labels == [["b"]]


def test_a_higher_threshold_drops_the_labels_at_half() -> None:
    strict = Labeller(CLASSES, multi_label=True, threshold=0.6)
    labels, _ = strict.decode(LOGITS)
    assert labels == [["a"], [], ["b"], ["a"]]
    assert LABELLER.decode(LOGITS)[0] == [["a"], ["a"], ["b", "c"], ["a"]]
    # samples 0 and 2 now exactly right (2 lost c), sample 1 lost a
    assert multilabel_reports.summary(OUTPUTS, strict, "val")["val/subset_acc"] == 0.5


def test_hardest_rows_are_the_highest_mean_bce_first(tmp_path: Path) -> None:
    rows = multilabel_reports.hardest(OUTPUTS, LABELLER, lambda i: f"img{i}.png", 2)
    p = LOGITS.sigmoid().double()
    losses = [
        -sum(math.log(p[i, k]) if TARGETS[i, k] else math.log(1 - p[i, k]) for k in range(3)) / 3
        for i in range(4)
    ]
    worst = sorted(range(4), key=lambda i: -losses[i])[:2]
    assert [r["index"] for r in rows] == [10 + i for i in worst]
    assert [r["loss"] for r in rows] == pytest.approx([losses[i] for i in worst])
    multilabel_reports.write_reports(
        tmp_path, multilabel_reports.per_class(OUTPUTS, LABELLER), rows
    )
    written = _read(tmp_path / "hardest.csv")
    assert list(written[0]) == ["path", "labels", "predicted", "loss", "scores"]
    by_path = {r["path"]: r for r in written}
    assert (by_path["img11.png"]["labels"], by_path["img11.png"]["predicted"]) == ("a|b", "a")
    assert list(_read(tmp_path / "per_class.csv")[0]) == multilabel_reports.PER_CLASS_COLUMNS
    assert not (tmp_path / "confusion.csv").exists()


def test_predictions_csv_reads_back_with_the_csv_module(tmp_path: Path) -> None:
    logits = torch.cat([LOGITS, torch.tensor([[-1.0, -2.0, -0.01]])])  # nothing at 0.5
    paths = [f"dir/img,{i}.png" for i in range(5)]  # a comma: the csv module quotes it
    outputs = Outputs(logits, torch.zeros(5), torch.arange(5))
    rows = multi_label_rows(outputs, paths, LABELLER)
    write_csv(tmp_path / "predictions.csv", MULTI_LABEL_COLUMNS, rows)
    read = _read(tmp_path / "predictions.csv")
    assert list(read[0]) == ["path", "labels", "scores"]
    assert [r["path"] for r in read] == paths
    for row, expected in zip(read, logits.sigmoid(), strict=True):
        scores = {
            name: float(score)
            for name, score in (item.rsplit(":", 1) for item in row["scores"].split("|"))
        }
        assert list(scores) == CLASSES  # every class, in class order
        assert list(scores.values()) == expected.tolist()  # exactly the compared values
        labels = row["labels"].split("|") if row["labels"] else []
        assert labels == [name for name, score in scores.items() if score >= 0.5]
    assert [r["labels"] for r in read] == ["a", "a", "b|c", "a", ""]


def test_labeller_from_a_saved_config() -> None:
    saved = {"data": {"classes": CLASSES}, "dataset": {"multi_label": True}}
    assert Labeller.from_config(saved) == Labeller(CLASSES, True, 0.5)  # no metrics.threshold
    saved["metrics"] = {"threshold": 0.3}
    assert Labeller.from_config(saved).threshold == 0.3
    assert Labeller.from_config(saved, 0.7, "predict.threshold").threshold == 0.7
    with pytest.raises(ConfigError, match=r"^predict\.threshold=1\.5: expected a number from 0"):
        Labeller.from_config(saved, 1.5, "predict.threshold")
    single = {"data": {"classes": CLASSES}, "dataset": {}, "metrics": {"acc": {}}}
    labeller = Labeller.from_config(single)
    assert not labeller.multi_label
    labels, scores = labeller.decode(LOGITS)
    assert labels == [["a"], ["a"], ["b"], ["a"]]
    assert torch.allclose(scores.sum(1), torch.ones(4))
    with pytest.raises(ConfigError, match=r"eval\.threshold=0\.5: the checkpoint is single-label"):
        Labeller.from_config(single, 0.5, "eval.threshold")


def test_a_multi_label_eval_returns_its_map_where_single_label_returns_acc(reference_cfg) -> None:
    cfg = reference_cfg("e", "mode=eval", "eval.split=test")
    measured = {"test/loss": 0.3, "test/map": 0.7, "test/f1": 0.6, "test/subset_acc": 0.5}
    assert headline(cfg, measured) == 0.7  # not test/loss, which ranks the other way
    assert headline(cfg, measured | {"test/acc": 0.9}) == 0.9
    ranked = reference_cfg("r", "mode=eval", "summary.rank_by=test/f1")
    assert headline(ranked, measured) == 0.6
