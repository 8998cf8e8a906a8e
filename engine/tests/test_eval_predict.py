"""After training: mode=eval reproduces the training's best val/loss from the checkpoint alone
and writes its reports, mode=predict agrees with it on the val folder, and a mislabelled file
tops hardest.csv. End to end on the reference project: a checkpoint its loop wrote."""

from __future__ import annotations

import csv
import json
import os
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
import torch
from hydra.errors import InstantiationException
from omegaconf import DictConfig, OmegaConf
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from engine.data.decode import SampleError
from engine.inference.checkpoint import run_config
from engine.inference.moved_targets import moved_targets
from engine.modes.evaluation import evaluate_checkpoint
from engine.modes.prediction import predict
from engine_dev.cli import run_script
from reference.loop import train
from tests.conftest import TRAIN, compose_reference, reference_args

# Learns the 48 tiny-demo train images well enough that a circle filed as a square is the
# hardest of them (its loss ~11 against ~4 next, at seeds 0, 1 and 2), in ~2 s
LEARN = ("model.width=64", "transforms.train=${transforms.val}", "trainer.max_epochs=40")
ONE_STEP = ("trainer.max_epochs=1", "trainer.limit_train_batches=1", "trainer.limit_val_batches=1")


def _rows(path: Path) -> list[dict[str, str]]:
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


@pytest.fixture(scope="module")
def trained(demo_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict]:
    """A run dir the reference project's loop trained on the tiny demo set, and its final
    metrics (once for the module)."""
    log_dir = tmp_path_factory.mktemp("trained")
    cfg = compose_reference(demo_dir, log_dir, log_dir / "run", *LEARN)
    return log_dir / "run", train(cfg)


@pytest.fixture
def on_checkpoint(reference_cfg, monkeypatch) -> Callable[..., DictConfig]:
    """The reference project's config for a run on a checkpoint (mode=eval, predict), writing
    to tmp_path/out; `*overrides` also stand for the command line's, whose keys replace the
    checkpoint's."""

    def _make(*overrides: str) -> DictConfig:
        monkeypatch.setattr("engine.inference.session.task_overrides", lambda: list(overrides))
        return reference_cfg("out", *overrides)

    return _make


def _best_val_loss(run: Path) -> float:
    return min(float(r["val/loss"]) for r in _rows(run / "history.csv"))


def test_eval_reproduces_the_best_val_acc_and_predict_agrees(
    trained, on_checkpoint, demo_dir: Path, tmp_path: Path
) -> None:
    run, _ = trained
    results = evaluate_checkpoint(on_checkpoint("mode=eval", f"eval.checkpoint={run}"))
    out = tmp_path / "out"
    # best.pt (the monitor is val/loss), measured from scratch
    assert results["val/loss"] == pytest.approx(_best_val_loss(run), rel=1e-6)
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
    last = run / "checkpoints" / "last.pt"  # the weights that learned these images
    evaluate_checkpoint(
        on_checkpoint("mode=eval", f"eval.checkpoint={last}", f"dataset.root={root}")
    )
    top = {row["path"]: row for row in _rows(tmp_path / "out" / "hardest.csv")[:3]}
    assert str(wrong) in top  # among the first rows (here: the first, loss ~11 against ~4)
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
    assert test["test/loss"] == pytest.approx(val["val/loss"])
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


def test_new_output_files_follow_the_umask(
    trained, on_checkpoint, reference_cfg, demo_dir, tmp_path
) -> None:
    run, _ = trained
    inputs = tmp_path / "inputs"
    shutil.copytree(demo_dir / "imagefolder" / "val" / "star", inputs)
    (inputs / "broken.png").write_bytes(b"not an image")
    old = os.umask(0o027)
    try:
        train(reference_cfg("train", *ONE_STEP))
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


def test_run_config_takes_the_checkpoint_and_the_command_line(reference_cfg) -> None:
    saved = OmegaConf.to_container(reference_cfg("run", "dataset=csv"), resolve=True)
    saved["data"] = {"classes": ["a", "b"]}  # type: ignore[index]
    cfg = reference_cfg("run", "mode=eval", "dataset.root=/other", "loader.batch_size=7")
    merged = run_config(cfg, saved, ["dataset.root=/other", "loader.batch_size=7", "mode=eval"])  # type: ignore[arg-type]
    assert merged.dataset._target_.endswith("CsvDataset")  # the checkpoint's kind...
    assert merged.dataset.root == "/other" and merged.loader.batch_size == 7  # ...these keys not
    assert merged.mode == "eval" and merged.data.classes == ["a", "b"]
    whole = run_config(cfg, saved, ["dataset=imagefolder"])  # type: ignore[arg-type]
    assert whole.dataset._target_.endswith("ImageFolderDataset")


def test_eval_from_the_command_line(trained, demo_dir: Path, tmp_path: Path) -> None:
    run, _ = trained
    result = run_script(
        TRAIN,
        *reference_args(
            demo_dir,
            tmp_path,
            "mode=eval",
            f"eval.checkpoint={run}",
            f"dataset.root={demo_dir / 'imagefolder'}",
            "eval.hardest=5",
            f"hydra.run.dir={tmp_path / 'eval'}",
        ),
        cwd=tmp_path,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    written = json.loads((tmp_path / "eval" / "metrics.json").read_text())
    assert written["val/loss"] == pytest.approx(_best_val_loss(run), rel=1e-6)
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
    one of its weights") for the command line's own model override (here another width)."""
    run, _ = trained
    result = run_script(
        TRAIN,
        *reference_args(
            demo_dir,
            tmp_path,
            "mode=eval",
            f"eval.checkpoint={run}",
            "model.width=16",
            f"dataset.root={demo_dir / 'imagefolder'}",
            f"hydra.run.dir={tmp_path / 'eval'}",
        ),
        cwd=tmp_path,
    )
    assert result.returncode != 0
    assert "model.width=16 on the command line builds another model than the one" in result.stderr


def test_a_checkpoint_from_before_the_engine_split_still_evaluates(
    trained, on_checkpoint, tmp_path: Path, caplog
) -> None:
    # a checkpoint trained before engine 1.0 saved the modules' names of the time (src.data...)
    run, _ = trained
    state = torch.load(run / "checkpoints" / "best.pt", map_location="cpu", weights_only=True)
    old_names = {"engine.data.": "src.data.", "engine.training.settings.": "src.training.settings."}
    text = json.dumps(state["config"])
    for new, old in old_names.items():
        text = text.replace(f'"{new}', f'"{old}')
    assert '"src.data.' in text and '"src.training.settings.' in text
    state["config"] = json.loads(text)
    old = tmp_path / "before_1_0.pt"
    torch.save(state, old)
    with caplog.at_level("INFO"):
        results = evaluate_checkpoint(on_checkpoint("mode=eval", f"eval.checkpoint={old}"))
    assert results["val/loss"] == pytest.approx(_best_val_loss(run), rel=1e-6)
    assert f"{old} was written before engine 1.0" in caplog.text
    # the template's own modules of the time (the reference project has none) read as today's
    saved = {
        "loss": {"_target_": "src.training.losses.LabelSmoothing"},
        "metrics": {"acc": {"_target_": "src.training.metrics.accuracy.Accuracy"}},
        "scheduler": {"_target_": "src.training.schedules.cosine"},
    }
    now = moved_targets(saved, old)
    assert now["loss"]["_target_"] == "src.losses.LabelSmoothing"
    assert now["metrics"]["acc"]["_target_"] == "src.metrics.accuracy.Accuracy"
    assert now["scheduler"]["_target_"] == "src.schedules.cosine"
