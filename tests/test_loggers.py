"""The logger group: several loggers at once hear every point (TensorBoard, metrics.csv, MLflow
read back with its own client, W&B's offline run file read back as written), metrics.csv keeps
one table across a resume, a logger of your own is one class plus one YAML, and a missing
package stops the run before any work. Offline throughout: nothing here reaches a network."""

from __future__ import annotations

import csv
import json
import struct
import sys
from pathlib import Path
from typing import Any

import pytest
from mlflow.tracking import MlflowClient
from omegaconf import OmegaConf
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
from wandb.proto import wandb_internal_pb2

from engine.api import Logger, RunContext
from engine.runs.hparams import hparams_of
from src.loop import train
from tests.cli import run_cli
from tests.conftest import CONF_DIR, NARROW_MODEL
from tests.train_process import kill_at_step

# 48 train images / batch 16 = 3 optimizer steps an epoch; 2 epochs = 6 steps
RUN = ("trainer.max_epochs=2", "trainer.log_every_n_steps=1", "model.widths=[8,16]")
PER_STEP = [1, 2, 3, 4, 5, 6]  # train/loss, train/lr
EPOCH_ENDS = [3, 6]  # val/acc, val/loss, epoch, ...


@pytest.fixture
def offline_wandb(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """W&B offline, silent, its settings and caches in tmp_path; no key, so no login."""
    for var, value in {
        "WANDB_MODE": "offline",
        "WANDB_SILENT": "true",
        "WANDB_DIR": str(tmp_path / "wandb_dir"),
        "WANDB_CACHE_DIR": str(tmp_path / "wandb_cache"),
        "WANDB_CONFIG_DIR": str(tmp_path / "wandb_config"),
        "WANDB_DATA_DIR": str(tmp_path / "wandb_data"),
    }.items():
        monkeypatch.setenv(var, value)
    monkeypatch.delenv("WANDB_API_KEY", raising=False)
    monkeypatch.delenv("WANDB_BASE_URL", raising=False)


def read_csv(run: Path) -> dict[str, list[tuple[int, float]]]:
    """metrics.csv as key -> [(step, value)] in file order."""
    series: dict[str, list[tuple[int, float]]] = {}
    with (run / "metrics.csv").open() as file:
        for row in csv.DictReader(file):
            series.setdefault(row["key"], []).append((int(row["step"]), float(row["value"])))
    return series


def wandb_records(run_file: Path) -> list[Any]:
    """The records of a W&B run file (LevelDB's log format: a 7-byte file header, then 32 KiB
    blocks of chunks, each with a crc32, a length and a type: full, first, middle, last)."""
    data, records, pending, at = run_file.read_bytes(), [], b"", 7
    assert data[:4] == b":W&B"
    while at + 7 <= len(data):
        if 32768 - at % 32768 < 7:  # a block's tail too short for a chunk header: padding
            at += 32768 - at % 32768
            continue
        _, length, kind = struct.unpack("<IHB", data[at : at + 7])
        pending += data[at + 7 : at + 7 + length]
        at += 7 + length
        if kind in (1, 4):  # a full record, or the last chunk of one
            records.append(wandb_internal_pb2.Record.FromString(pending))
            pending = b""
    return records


def wandb_run(run: Path) -> tuple[dict[str, list[tuple[int, float]]], dict[str, Any], int]:
    """The W&B offline run in `run`: its history (key -> [(step, value)]), its final summary
    and its exit code."""
    (run_file,) = run.glob("wandb/offline-run-*/run-*.wandb")
    history: dict[str, list[tuple[int, float]]] = {}
    summary: dict[str, Any] = {}
    exit_code = -1
    for record in wandb_records(run_file):
        kind = record.WhichOneof("record_type")
        if kind == "history":
            for item in record.history.item:
                key = "/".join(item.nested_key) or item.key
                if not key.startswith("_"):
                    value = json.loads(item.value_json)
                    history.setdefault(key, []).append((record.history.step.num, value))
        elif kind == "summary":
            for item in record.summary.update:
                summary["/".join(item.nested_key) or item.key] = json.loads(item.value_json)
        elif kind == "exit":
            exit_code = record.exit.exit_code
    return history, summary, exit_code


def test_several_loggers_at_once_each_get_every_point(make_cfg, tmp_path, offline_wandb) -> None:
    store = tmp_path / "mlruns"
    cfg = make_cfg(
        *RUN,
        "logger=[tensorboard,csv,mlflow,wandb]",
        f"logger.mlflow.tracking_uri={store}",
        "logger.mlflow.experiment=demo",
    )
    metrics = train(cfg)
    run = Path(cfg.paths.output_dir)

    table = read_csv(run)
    assert [step for step, _ in table["train/loss"]] == PER_STEP
    assert [step for step, _ in table["val/acc"]] == EPOCH_ENDS
    assert table["val/acc"][-1][1] == pytest.approx(metrics["val/acc"])

    board = EventAccumulator(str(run / "tensorboard"))
    board.Reload()
    tensorboard = [(e.step, pytest.approx(e.value)) for e in board.Scalars("val/loss")]
    assert tensorboard == table["val/loss"]

    client = MlflowClient(tracking_uri=store.as_uri())
    experiment = client.get_experiment_by_name("demo")
    (found,) = client.search_runs([experiment.experiment_id])
    assert found.info.status == "FINISHED" and found.info.run_name == run.name
    history = client.get_metric_history(found.info.run_id, "train/loss")
    assert [(m.step, pytest.approx(m.value)) for m in history] == table["train/loss"]
    assert found.data.metrics["wall_s"] == pytest.approx(metrics["wall_s"])  # a final-only key
    assert found.data.params["dataset"] == "ImageFolderDataset"  # the HParams columns

    points, summary, exit_code = wandb_run(run)
    assert points["train/loss"] == [(s, pytest.approx(v)) for s, v in table["train/loss"]]
    assert [step for step, _ in points["val/acc"]] == EPOCH_ENDS
    assert summary["val/acc"] == pytest.approx(metrics["val/acc"]) and exit_code == 0


@pytest.mark.parametrize("resumed_in", ["second", "first"])  # a new run dir, or its own
def test_a_resumed_training_keeps_one_metrics_csv(make_cfg, tmp_path, monkeypatch, resumed_in):
    run = (*RUN, "logger=csv", "trainer.checkpoint.every_n_steps=2", f"paths.log_dir={tmp_path}")
    kill_at_step(monkeypatch, 6)  # checkpoints at steps 2, 3, 4; step 5 is the killed tail
    with pytest.raises(RuntimeError, match="killed"):
        train(make_cfg(*run, f"paths.output_dir={tmp_path / 'first'}"))
    killed = read_csv(tmp_path / "first")
    assert [step for step, _ in killed["train/loss"]] == [1, 2, 3, 4, 5]
    monkeypatch.undo()
    train(make_cfg(*run, f"paths.output_dir={tmp_path / resumed_in}", "trainer.resume=auto"))

    table = read_csv(tmp_path / resumed_in)
    assert [step for step, _ in table["train/loss"]] == PER_STEP  # each step once
    assert table["train/loss"][:4] == killed["train/loss"][:4]  # up to the checkpoint
    assert [step for step, _ in table["val/acc"]] == EPOCH_ENDS
    assert not (tmp_path / resumed_in / "tensorboard").exists()  # logger=csv alone


def test_the_loggers_chosen_are_no_hparams_column() -> None:
    config = {"dataset": {"_target_": "x.Csv"}, "logger": {"mlflow": {"experiment": "x"}}}
    choices = {"dataset": "csv", "logger": "[tensorboard, mlflow]", "local": "default"}
    overrides = ["logger=[tensorboard,mlflow]", "logger.mlflow.experiment=x", "dataset=csv"]
    assert hparams_of(config, choices, overrides) == {"dataset": "csv"}  # where, not what


class Recorder(Logger):
    """A logger of one's own: every call as a JSON line in `path`."""

    def __init__(self, run: RunContext, path: str) -> None:
        self.file = Path(path).open("a")  # noqa: SIM115 (a logger's file: closed in close)
        self.log("start", step=run.start_step, out=str(run.out))

    def log(self, call: str, **fields: Any) -> None:
        self.file.write(json.dumps({"call": call, **fields}) + "\n")

    def scalars(self, values: dict[str, float], step: int) -> None:
        self.log("scalars", values=values, step=step)

    def image(self, tag: str, image: Any, step: int = 0) -> None:
        self.log("image", tag=tag, shape=list(image.shape))

    def finish(self, metrics: dict[str, float], step: int) -> None:
        self.log("finish", metrics=metrics, step=step)

    def close(self) -> None:
        self.log("close")
        self.file.close()


def test_a_logger_of_your_own_is_one_class_and_one_yaml(demo_dir: Path, tmp_path: Path) -> None:
    (tmp_path / "conf" / "logger").mkdir(parents=True)
    (tmp_path / "conf" / "logger" / "recorder.yaml").write_text(
        "# @package logger.recorder\n"
        "_target_: tests.test_loggers.Recorder\n"
        "path: ${paths.output_dir}/calls.jsonl  # where the calls go\n"
    )
    allowed = [*OmegaConf.load(CONF_DIR / "config.yaml").allowed_targets, "tests.test_loggers.*"]
    run = tmp_path / "run"
    result = run_cli(
        f"hydra.searchpath=[pkg://engine.conf,file://{tmp_path / 'conf'}]",
        "logger=[csv,recorder]",
        f"allowed_targets=[{','.join(allowed)}]",
        f"paths.demo_dir={demo_dir}",
        f"paths.log_dir={tmp_path}",
        f"hydra.run.dir={run}",
        "trainer.max_epochs=1",
        "trainer.log_every_n_steps=1",
        "loader.num_workers=0",
        "loader.batch_size=16",
        NARROW_MODEL,
        cwd=tmp_path,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    calls = [json.loads(line) for line in (run / "calls.jsonl").read_text().splitlines()]
    assert [c["call"] for c in calls[:2]] == ["start", "image"]
    assert [c["call"] for c in calls[-2:]] == ["finish", "close"]
    points = [c for c in calls if c["call"] == "scalars"]
    assert [c["step"] for c in points if "train/loss" in c["values"]] == [1, 2, 3]
    assert [c["step"] for c in points if "val/acc" in c["values"]] == [3]
    assert calls[-2]["metrics"] == json.loads((run / "metrics.json").read_text())
    assert calls[-2]["step"] == 4  # one past the last optimizer step
    assert read_csv(run)["val/acc"] == [(3, pytest.approx(calls[-2]["metrics"]["val/acc"]))]


@pytest.mark.parametrize("name", ["mlflow", "wandb"])
def test_a_missing_package_stops_the_run_before_any_work(
    demo_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str
) -> None:
    monkeypatch.setitem(sys.modules, name, None)  # importlib.util.find_spec: not installed
    run = tmp_path / "run"
    result = run_cli(
        f"logger=[tensorboard,{name}]",
        f"paths.demo_dir={demo_dir}",
        f"paths.log_dir={tmp_path}",
        f"hydra.run.dir={run}",
        cwd=tmp_path,
    )
    assert result.returncode == 1  # the error's one line, as Hydra prints a config error
    said = f"run failed: ConfigError: logger={name} needs {name}: pip install -e '.[loggers]'"
    assert [line for line in result.stderr.splitlines() if line.endswith(said)]
    assert not (run / "checkpoints").exists() and not (run / "tensorboard").exists()


def test_a_node_that_is_not_a_logger_is_refused(demo_dir: Path, tmp_path: Path) -> None:
    result = run_cli(
        "+logger.mine._target_=torch.nn.Identity",
        f"paths.demo_dir={demo_dir}",
        f"paths.log_dir={tmp_path}",
        f"hydra.run.dir={tmp_path / 'run'}",
        cwd=tmp_path,
    )
    assert result.returncode == 1
    said = (
        "logger.mine._target_=torch.nn.Identity: not a logger; name a "
        "subclass of engine.runs.loggers.base.Logger (engine/docs/engine.md)."
    )
    assert [line for line in result.stderr.splitlines() if line.endswith(said)]
