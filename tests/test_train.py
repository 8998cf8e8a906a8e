"""End to end: train() on each dataset kind writes metrics, checkpoint and TensorBoard tags."""

from __future__ import annotations

import copy
import csv
import json
import warnings
from pathlib import Path

import pytest
import torch
from omegaconf import DictConfig
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
from tensorboard.plugins.hparams.plugin_data_pb2 import HParamsPluginData

from engine.api import Precision, assemble
from engine_dev.api import evaluate, load_checkpoint, mover_for
from src.loop import train
from src.step import TrainStep
from tests.cli import run_cli
from tests.conftest import tiny_model

METRIC_KEYS = {
    "val/acc",
    "val/loss",
    "train/loss",
    "train/samples_per_s",
    "train/data_wait_frac",
    "epochs",
    "wall_s",
}
SCALARS = {
    "train/loss",
    "train/lr",
    "val/loss",
    "val/acc",
    "train/samples_per_s",
    "train/data_wait_frac",
}


def _tensorboard(run: Path) -> EventAccumulator:
    acc = EventAccumulator(str(run / "tensorboard"), size_guidance={"tensors": 0, "images": 0})
    acc.Reload()
    return acc


def _evaluate_again(cfg: DictConfig, weights: dict[str, torch.Tensor], out: Path) -> dict:
    """Val metrics of `weights`, evaluated in a fresh build of `cfg`'s parts."""
    cfg = copy.deepcopy(cfg)
    cfg.paths.output_dir = str(out)
    parts = assemble(cfg)
    parts.model.load_state_dict(weights)
    move, loader = mover_for(parts), parts.val_loader
    return evaluate(parts.model, loader, move, parts.precision, parts.criterion, parts.metrics)


@pytest.mark.parametrize("dataset", ["imagefolder", "csv", "tensor", "iterable", "parquet", "mix"])
def test_train_each_dataset_kind(make_cfg, tmp_path: Path, dataset: str) -> None:
    cfg = make_cfg(f"dataset={dataset}", "trainer.max_epochs=2", "trainer.log_every_n_steps=1")
    metrics = train(cfg)
    run = Path(cfg.paths.output_dir)
    written = json.loads((run / "metrics.json").read_text())
    assert written.keys() >= METRIC_KEYS and written["epochs"] == 2
    assert written == pytest.approx(metrics)
    assert written["train/samples_per_s"] > 0
    # what val/acc was measured on: the demo's val split (a mix: both sources')
    assert written["val/samples"] == (60 if dataset == "mix" else 30)
    state = load_checkpoint(run / "checkpoints" / "last.pt")
    assert state["epoch"] == 2 and state["classes"] == [
        "circle",
        "cross",
        "square",
        "star",
        "triangle",
    ]
    again = _evaluate_again(cfg, state["model"], tmp_path / "again")  # the saved weights
    assert again["val/acc"] == written["val/acc"]  # are the ones the run's val/acc measured
    assert again["val/loss"] == pytest.approx(written["val/loss"], rel=1e-6)
    board = _tensorboard(run)
    tags = board.Tags()
    assert set(tags["scalars"]) >= SCALARS
    assert "val/samples" not in tags["scalars"]  # a count, no curve: metrics.json holds it
    # TensorBoard opens its first two tag groups, in ASCII order: the curves, not the plumbing
    groups = sorted({tag.split("/")[0] for tag in [*tags["scalars"], *tags["images"]]})
    assert groups[:2] == ["train", "val"] and "epoch" not in groups, groups
    assert len(board.Scalars("val/acc")) == 2  # one point per epoch
    steps = [e.step for e in board.Scalars("train/loss")]  # one x-axis: optimizer steps
    assert steps == sorted(set(steps))
    assert "train/first_batch" in tags["images"] and "config/text_summary" in tags["tensors"]
    first = board.Images("train/first_batch")[0]  # one labelled grid: tiles over class names
    assert first.width >= 8 * 96
    hparams = board.PluginTagToContent("hparams")
    start = HParamsPluginData.FromString(hparams["_hparams_/session_start_info"])
    columns = start.session_start_info.hparams
    # the choices that tell runs apart, the data's values; not the whole flattened config
    assert {"dataset", "model", "loader.batch_size", "data.num_classes", "data.classes"} <= set(
        columns
    )
    assert len(columns) < 25 and "allowed_targets" not in str(list(columns))
    assert columns["data.input_shape"].string_value == "[3, 48, 48]"
    experiment = HParamsPluginData.FromString(hparams["_hparams_/experiment"]).experiment
    # the metrics are the run's own curves: no single-point hparams/* charts
    assert [m.name.tag for m in experiment.metric_infos] == [
        "val/acc",
        "val/loss",
        "train/epoch_loss",
        "train/samples_per_s",
    ]
    assert not [tag for tag in tags["scalars"] if tag.startswith("hparams/")]


def test_train_features_with_mlp(make_cfg, tmp_path: Path) -> None:
    generator = torch.Generator().manual_seed(0)
    labels = torch.arange(200) % 3
    inputs = torch.randn(200, 6, generator=generator) + labels[:, None].float() * 2
    torch.save({"inputs": inputs, "labels": labels}, tmp_path / "features.pt")
    cfg = make_cfg(
        "dataset=tensor",
        f"dataset.path={tmp_path / 'features.pt'}",
        "dataset.val_path=null",
        "dataset.val_fraction=0.25",
        "transforms=none",
        "model=mlp",
        "trainer.max_epochs=3",
        "optimizer.lr=0.01",
    )
    metrics = train(cfg)
    assert metrics["val/acc"] > 0.8  # well-separated clusters are learnt


def test_mixed_precision_and_grad_accum_run(make_cfg) -> None:
    cfg = make_cfg(
        "trainer.precision=bf16-mixed",
        "trainer.grad_accum=2",
        "trainer.max_epochs=1",
        "trainer.limit_train_batches=3",
        "trainer.channels_last=true",
        "sampler=weighted",
    )
    assert train(cfg)["epochs"] == 1
    with pytest.raises(
        ValueError, match=r"^trainer.precision=16-mixed on the CPU: fp16 .*=bf16-mixed"
    ):
        train(make_cfg("trainer.precision=16-mixed", "trainer.device=cpu"))


def test_a_step_fp16_loss_scaling_skips_leaves_the_schedule_where_it_was() -> None:
    """The step's own logic, on a CPU loss scaler (runs refuse fp16 on the CPU): an inf
    gradient skips the optimizer step, and the schedule does not advance out of order."""
    model = torch.nn.Linear(2, 2)
    optimizer = torch.optim.SGD(model.parameters(), lr=1.0)
    schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: 0.5**step)
    precision = Precision(torch.device("cpu"), torch.float16, torch.amp.GradScaler("cpu"))
    step = TrainStep(model, torch.nn.MSELoss(), optimizer, schedule, precision)
    before = model.weight.detach().clone()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        step.backward(model(torch.tensor([[float("inf"), 1.0]])).sum())
        step.optimizer_step()
    assert torch.equal(model.weight, before) and optimizer.param_groups[0]["lr"] == 1.0
    assert step.steps == 1 and not [w for w in caught if "lr_scheduler.step()" in str(w.message)]


def test_multirun_over_loader_knobs_gives_one_dir_per_job_ranked_by_speed(
    demo_dir: Path, tmp_path: Path
) -> None:
    result = run_cli(
        "-m",
        f"paths.demo_dir={demo_dir}",
        f"paths.log_dir={tmp_path}",
        "trainer.max_epochs=1",
        "loader.batch_size=8",
        "loader.num_workers=0,1",
        "loader.persistent_workers=true,false",
        *tiny_model(demo_dir),
        cwd=tmp_path,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    written = [json.loads(p.read_text()) for p in tmp_path.glob("multiruns/*/*/*/metrics.json")]
    # persistent_workers does not apply at num_workers=0: one of those two runs as the other,
    # and its dir holds the other's metrics, marked
    assert len(written) == 4 and sorted(m.get("same_as", -1) for m in written) == [-1, -1, -1, 0]
    assert all(m["epochs"] == 1 for m in written)
    # the jobs learn alike (val/acc apart by float rounding): the summary ranks them by speed
    (sweep_dir,) = tmp_path.glob("multiruns/*/*")
    with open(sweep_dir / "summary.csv", newline="") as f:
        ok = [r for r in csv.DictReader(f) if r["status"] == "ok"]
    fastest = max(ok, key=lambda r: float(r["train/samples_per_s"]))
    summary = (sweep_dir / "summary.md").read_text()
    assert "Ranked by `train/samples_per_s`" in summary
    assert f"Recommended: job {fastest['job']}: " in summary
    assert "; the best by train/samples_per_s." in summary
