"""After training: mode=eval reproduces the training's best val/acc from the checkpoint alone and
writes its reports, mode=predict agrees with it on the val folder, and a mislabelled file tops
hardest.csv."""

from __future__ import annotations

import csv
import json
import os
import shutil
from pathlib import Path

import pytest
import torch
from hydra.errors import InstantiationException
from omegaconf import OmegaConf
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from engine.data.decode import SampleError
from engine.inference.checkpoint import run_config
from engine.modes.evaluation import evaluate_checkpoint
from engine.modes.prediction import predict
from src.loop import train
from tests import checkpoint_configs
from tests.cli import run_cli
from tests.conftest import compose_config

on_checkpoint = checkpoint_configs.on_checkpoint  # a fixture (mode=eval, predict configs)

# Learns the 48 tiny-demo train images by heart (train/loss ~0.1), in ~50 optimizer steps
TRAIN = (
    "model.widths=[32,64]",
    "model.dropout=0.0",
    "transforms.train=${transforms.val}",
    "scheduler=constant",
    "optimizer.lr=0.003",
    "trainer.max_epochs=16",
)


def _rows(path: Path) -> list[dict[str, str]]:
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


@pytest.fixture(scope="module")
def trained(demo_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict]:
    """A run dir trained on the tiny demo set, and its final metrics."""
    run = tmp_path_factory.mktemp("trained") / "run"
    return run, train(compose_config(demo_dir, run, *TRAIN))


def test_eval_reproduces_the_best_val_acc_and_predict_agrees(
    trained, on_checkpoint, demo_dir: Path, tmp_path: Path
) -> None:
    run, metrics = trained
    results = evaluate_checkpoint(on_checkpoint("mode=eval", f"eval.checkpoint={run}"))
    out = tmp_path / "out"
    assert results["val/acc"] == metrics["val/best_acc"]  # best.pt, measured from scratch
    best = max(_rows(run / "history.csv"), key=lambda r: float(r["val/acc"]))
    assert results["val/loss"] == pytest.approx(float(best["val/loss"]), rel=1e-6)
    assert json.loads((out / "metrics.json").read_text()) == pytest.approx(results)
    per_class = _rows(out / "per_class.csv")
    assert list(per_class[0]) == ["class", "support", "precision", "recall", "f1"]
    assert sum(int(r["support"]) for r in per_class) == 30
    mean_recall = sum(float(r["recall"]) for r in per_class) / 5
    assert results["val/acc_per_class"] == pytest.approx(mean_recall)
    confusion = _rows(out / "confusion.csv")
    hits = sum(int(row[row["true \\ predicted"]]) for row in confusion)
    assert hits / 30 == pytest.approx(results["val/acc"])
    hardest = _rows(out / "hardest.csv")
    assert (
        list(hardest[0]) == ["path", "label", "predicted", "score", "loss"] and len(hardest) == 30
    )
    assert [float(r["loss"]) for r in hardest] == sorted(
        (float(r["loss"]) for r in hardest), reverse=True
    )
    assert (out / "confusion.png").stat().st_size > 0
    board = EventAccumulator(str(out / "tensorboard"), size_guidance={"images": 0})
    board.Reload()
    assert {"val/confusion", "val/hardest"} <= set(board.Tags()["images"])

    folder = demo_dir / "imagefolder" / "val"
    predict(on_checkpoint("mode=predict", f"predict.checkpoint={run}", f"predict.input={folder}"))
    rows = _rows(out / "predictions.csv")
    assert list(rows[0]) == ["path", "label", "score"] and len(rows) == 30
    right = sum(Path(r["path"]).parent.name == r["label"] for r in rows)
    assert right / len(rows) == results["val/acc"]


def test_a_mislabelled_file_tops_hardest_csv(trained, on_checkpoint, demo_dir, tmp_path) -> None:
    run, _ = trained
    root = tmp_path / "root"  # another root with the same classes: val/ holds the train images
    shutil.copytree(demo_dir / "imagefolder" / "train", root / "val")
    circle = sorted((root / "val" / "circle").iterdir())[0]
    wrong = root / "val" / "square" / f"mislabelled{circle.suffix}"
    shutil.copy(circle, wrong)  # a circle filed as a square
    last = run / "checkpoints" / "last.pt"  # the weights that learned these images by heart
    evaluate_checkpoint(
        on_checkpoint("mode=eval", f"eval.checkpoint={last}", f"dataset.root={root}")
    )
    top = {row["path"]: row for row in _rows(tmp_path / "out" / "hardest.csv")[:3]}
    assert str(wrong) in top  # among the first rows (here: the first, loss ~3.5 against ~1)
    assert (top[str(wrong)]["label"], top[str(wrong)]["predicted"]) == ("square", "circle")


def test_eval_on_a_test_split_and_a_class_mismatch(trained, on_checkpoint, demo_dir, tmp_path):
    run, _ = trained
    root = tmp_path / "root"
    shutil.copytree(demo_dir / "imagefolder", root)
    shutil.copytree(root / "val", root / "test")
    test = evaluate_checkpoint(
        on_checkpoint(
            "mode=eval", f"eval.checkpoint={run}", "eval.split=test", f"dataset.root={root}"
        )
    )
    val = evaluate_checkpoint(on_checkpoint("mode=eval", f"eval.checkpoint={run}"))
    assert set(test) == {"test/acc", "test/loss", "test/acc_per_class"}
    assert test["test/acc"] == val["val/acc"]  # test/ is a copy of val/
    (root / "val" / "hexagon").mkdir()
    shutil.copy(next((root / "val" / "star").iterdir()), root / "val" / "hexagon" / "h.png")
    with pytest.raises(
        InstantiationException, match=r"class folders \['hexagon'\] that the train split does not"
    ):
        evaluate_checkpoint(
            on_checkpoint("mode=eval", f"eval.checkpoint={run}", f"dataset.root={root}")
        )


def test_predict_inputs_top_k_and_unreadable_files(trained, on_checkpoint, demo_dir, tmp_path):
    run, _ = trained
    inputs = tmp_path / "inputs" / "nested"
    inputs.mkdir(parents=True)
    for image in sorted((demo_dir / "imagefolder" / "val" / "star").iterdir())[:2]:
        shutil.copy(image, inputs / image.name)
    (inputs / "broken.jpg").write_bytes(b"not an image")
    listing = tmp_path / "inputs" / "list.csv"
    listing.write_text("path\nnested/" + "\nnested/".join(sorted(p.name for p in inputs.iterdir())))
    with pytest.raises(SampleError, match=r"broken\.jpg"):
        predict(
            on_checkpoint("mode=predict", f"predict.checkpoint={run}", f"predict.input={listing}")
        )
    skip = (
        "dataset.decode.on_error=skip",
        "dataset.decode.max_bad_fraction=0.5",
        "predict.top_k=3",
    )
    metrics = predict(
        on_checkpoint(
            "mode=predict",
            f"predict.checkpoint={run}",
            f"predict.input={tmp_path / 'inputs'}",
            *skip,
        )
    )
    rows = _rows(tmp_path / "out" / "predictions.csv")
    assert list(rows[0]) == ["path", "label", "score", "label_2", "score_2", "label_3", "score_3"]
    assert len(rows) == 2 and metrics == {"predict/samples": 2.0, "predict/unreadable": 1.0}
    assert float(rows[0]["score"]) >= float(rows[0]["score_2"]) >= float(rows[0]["score_3"])
    bad = _rows(tmp_path / "out" / "bad_samples.csv")
    assert [(b["split"], Path(b["path"]).name) for b in bad] == [("predict", "broken.jpg")]
    one = sorted(inputs.glob("*.png")) or sorted(inputs.glob("*.jpg"))
    predict(on_checkpoint("mode=predict", f"predict.checkpoint={run}", f"predict.input={one[0]}"))
    assert len(_rows(tmp_path / "out" / "predictions.csv")) == 1


def test_new_output_files_follow_the_umask(trained, on_checkpoint, demo_dir, tmp_path) -> None:
    run, _ = trained
    inputs = tmp_path / "inputs"
    shutil.copytree(demo_dir / "imagefolder" / "val" / "star", inputs)
    (inputs / "broken.png").write_bytes(b"not an image")
    old = os.umask(0o027)
    try:
        one_step = ("trainer.max_epochs=1", "trainer.limit_train_batches=1", "model.widths=[8]")
        train(compose_config(demo_dir, tmp_path / "train", *one_step))
        evaluate_checkpoint(on_checkpoint("mode=eval", f"eval.checkpoint={run}"))
        skip = ("dataset.decode.on_error=skip", "dataset.decode.max_bad_fraction=0.5")
        predict(
            on_checkpoint(
                "mode=predict", f"predict.checkpoint={run}", f"predict.input={inputs}", *skip
            )
        )
    finally:
        os.umask(old)
    files = [p for d in ("train", "out") for p in (tmp_path / d).rglob("*") if p.is_file()]
    assert {"history.csv", "per_class.csv", "confusion.csv", "confusion.png", "hardest.csv"} <= {
        p.name for p in files
    }
    assert {"predictions.csv", "bad_samples.csv", "config_resolved.yaml"} <= {p.name for p in files}
    modes = {str(p.relative_to(tmp_path)): oct(p.stat().st_mode & 0o777) for p in files}
    assert modes == dict.fromkeys(modes, oct(0o640))  # event files and checkpoints included


def test_run_config_takes_the_checkpoint_and_the_command_line(make_cfg) -> None:
    saved = OmegaConf.to_container(make_cfg("dataset=tensor"), resolve=True)
    saved["data"] = {"classes": ["a", "b"]}  # type: ignore[index]
    cfg = make_cfg("mode=eval", "dataset.root=/other", "loader.batch_size=7")
    merged = run_config(cfg, saved, ["dataset.root=/other", "loader.batch_size=7", "mode=eval"])  # type: ignore[arg-type]
    assert merged.dataset._target_.endswith("TensorFileDataset")  # the checkpoint's kind...
    assert merged.dataset.root == "/other" and merged.loader.batch_size == 7  # ...these keys not
    assert merged.mode == "eval" and merged.data.classes == ["a", "b"]
    whole = run_config(cfg, saved, ["dataset=imagefolder"])  # type: ignore[arg-type]
    assert whole.dataset._target_.endswith("ImageFolderDataset")


def test_eval_from_the_command_line(trained, demo_dir: Path, tmp_path: Path) -> None:
    run, metrics = trained
    result = run_cli(
        "mode=eval",
        f"eval.checkpoint={run}",
        f"dataset.root={demo_dir / 'imagefolder'}",
        "eval.hardest=5",
        f"paths.log_dir={tmp_path}",
        f"hydra.run.dir={tmp_path / 'eval'}",
        cwd=tmp_path,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    written = json.loads((tmp_path / "eval" / "metrics.json").read_text())
    assert written["val/acc"] == metrics["val/best_acc"]
    assert len(_rows(tmp_path / "eval" / "hardest.csv")) == 5
    links = list((tmp_path / "tensorboard" / "eval").iterdir())  # named by what ran
    assert [link.name for link in links] == [
        f"{tmp_path.name} eval checkpoint=run,root=imagefolder,hardest=5"
    ]
    assert links[0].resolve() == (tmp_path / "eval" / "tensorboard").resolve()


def test_another_model_on_the_eval_command_line_is_named_as_the_cause(
    trained, demo_dir: Path, tmp_path: Path
) -> None:
    """The refusal blamed the checkpoint ("the model its saved config describes is not the
    one of its weights") for the command line's own model=mlp."""
    run, _ = trained
    result = run_cli(
        "mode=eval",
        f"eval.checkpoint={run}",
        "model=mlp",
        f"dataset.root={demo_dir / 'imagefolder'}",
        f"paths.log_dir={tmp_path}",
        f"hydra.run.dir={tmp_path / 'eval'}",
        cwd=tmp_path,
    )
    assert result.returncode != 0
    assert "model=mlp on the command line builds another model than the one" in result.stderr


def test_a_checkpoint_from_before_the_engine_split_still_evaluates(
    trained, on_checkpoint, tmp_path: Path, caplog
) -> None:
    # a checkpoint trained before engine 1.0 saved the modules' names of the time (src.data...)
    run, metrics = trained
    state = torch.load(run / "checkpoints" / "best.pt", map_location="cpu", weights_only=True)
    old_names = {
        "engine.data.": "src.data.",
        "src.losses.": "src.training.losses.",
        "src.metrics.": "src.training.metrics.",
        "src.schedules.": "src.training.schedules.",
        "engine.training.settings.": "src.training.settings.",
    }
    text = json.dumps(state["config"])
    for new, old in old_names.items():
        text = text.replace(f'"{new}', f'"{old}')
    assert '"src.data.' in text and '"src.training.losses.' in text
    state["config"] = json.loads(text)
    old = tmp_path / "before_1_0.pt"
    torch.save(state, old)
    with caplog.at_level("INFO"):
        results = evaluate_checkpoint(on_checkpoint("mode=eval", f"eval.checkpoint={old}"))
    assert results["val/acc"] == metrics["val/best_acc"]
    assert f"{old} was written before engine 1.0" in caplog.text
