"""`mode=predict`: run a trained checkpoint on new images.

python train.py mode=predict predict.checkpoint=outputs/runs/2026-05-01/12-00-00_ab12cd \\
    predict.input=new_images/

`predict.input`: a folder (searched recursively for images), a CSV with a path column
(`predict.path_column`) or one image file. Writes predictions.csv into the run dir: `path`,
`label` (the class name), `score` (its probability), then `label_2`, `score_2`, ... up to
`predict.top_k`. The images go through the training's val transforms, loader settings and
device path (uint8 batches normalised on the device, its autocast). Unreadable inputs follow
the checkpoint's dataset.decode.on_error (override it: dataset.decode.on_error=skip): raise stops naming
the file, skip leaves it out and lists it in bad_samples.csv.

A multi-label checkpoint (its dataset.multi_label: true) writes `path`, `labels` (every class
whose sigmoid score is above `predict.threshold`, null: the checkpoint's metrics.threshold,
`|`-joined, empty for none) and `scores` (every class's, `name:score|...` in class order);
predict.top_k does not apply.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from hydra.utils import instantiate
from omegaconf import DictConfig, OmegaConf

from engine.core.io import write_csv, write_json
from engine.data.decode_policy import DecodePolicy
from engine.inference.checkpoint import BUILT as EVAL_BUILT
from engine.inference.inputs import InputImages, list_inputs
from engine.inference.labeller import Labeller
from engine.inference.passes import Outputs, run_pass
from engine.inference.session import open_checkpoint

log = logging.getLogger(__name__)

# The sections of a checkpoint's config a prediction builds: mode=eval's but the dataset, of
# which it reads only the decode node (a saved shard URL or pipe: is never opened).
BUILT = tuple(section for section in EVAL_BUILT if section != "dataset")
MULTI_LABEL_COLUMNS = ["path", "labels", "scores"]


@dataclass(frozen=True)
class PredictSettings:
    """The `predict` config group (see engine/conf/predict/default.yaml)."""

    checkpoint: str | None
    input: str | None
    top_k: int
    path_column: str
    threshold: float | None = None

    def __post_init__(self) -> None:
        if self.top_k < 1:
            raise ValueError(f"predict.top_k={self.top_k}: expected an int >= 1.")


def decoding(dataset: DictConfig) -> DecodePolicy:
    """The checkpoint's dataset.decode (the kind's default where it has none), decoded in the
    loader workers: a prediction's inputs are files, whatever device the training decoded on."""
    node = OmegaConf.to_container(dataset.get("decode") or {}, resolve=True)
    given = {k: v for k, v in node.items() if k not in ("_target_", "device")}  # type: ignore[union-attr]
    return DecodePolicy(**given)


def columns(top_k: int) -> list[str]:
    """predictions.csv's header: path, label, score, then label_k, score_k for k = 2..top_k."""
    return [
        "path",
        "label",
        "score",
        *(f"{c}_{k}" for k in range(2, top_k + 1) for c in ("label", "score")),
    ]


def _top_k_rows(outputs: Outputs, paths: list[str], classes: list[str], k: int) -> list[dict]:
    """A single-label model's rows: its `k` top classes and their probabilities."""
    scores, labels = outputs.probabilities().topk(k, dim=1)
    rows = []
    for index, top_scores, top_labels in zip(
        outputs.indices.tolist(), scores.tolist(), labels.tolist(), strict=True
    ):
        row: dict[str, object] = {"path": paths[index]}
        for rank, (score, label) in enumerate(zip(top_scores, top_labels, strict=True), 1):
            suffix = "" if rank == 1 else f"_{rank}"
            row |= {f"label{suffix}": classes[label], f"score{suffix}": score}
        rows.append(row)
    return rows


def multi_label_rows(outputs: Outputs, paths: list[str], labeller: Labeller) -> list[dict]:
    """A multi-label model's rows: the labels at the threshold and every class's score."""
    labels, scores = labeller.decode(outputs.logits)
    return [
        {
            "path": paths[index],
            "labels": labeller.joined(names),
            "scores": labeller.joined_scores(row),
        }
        for index, names, row in zip(outputs.indices.tolist(), labels, scores, strict=True)
    ]


def predict(cfg: DictConfig) -> dict[str, float]:
    """Predict the class (multi-label: the classes) of every `predict.input` image with
    `predict.checkpoint`."""
    settings: PredictSettings = instantiate(cfg.predict)
    session = open_checkpoint(cfg, settings.checkpoint, "predict.checkpoint", BUILT)
    labeller = Labeller.from_config(session.cfg, settings.threshold, "predict.threshold")
    if labeller.multi_label and settings.top_k != 1:
        raise ValueError(
            f"predict.top_k={settings.top_k}: {session.file} is multi-label, so "
            "predictions.csv lists every class above the threshold (predict.threshold) "
            "and every class's score; leave predict.top_k at 1."
        )
    labeller.check_names(session.file)
    shape = list(session.data["input_shape"])
    if len(shape) != 3:
        raise ValueError(
            f"predict.checkpoint: its model takes inputs of shape {shape}, not images, and "
            "mode=predict reads image files; measure it with mode=eval on its dataset instead."
        )
    paths = list_inputs(settings.input, settings.path_column)
    images = InputImages(paths, session.pipelines.val, decoding(session.cfg.dataset))
    loader = session.loader(images, "predict")
    outputs = run_pass(
        session.model, loader, session.mover(loader), session.precision, desc="predict"
    )
    if labeller.multi_label:
        header, rows = MULTI_LABEL_COLUMNS, multi_label_rows(outputs, paths, labeller)
    else:
        k = min(settings.top_k, len(session.classes))
        header, rows = columns(k), _top_k_rows(outputs, paths, session.classes, k)
    write_csv(session.out / "predictions.csv", header, rows)
    ledger = loader.bad_samples  # dataset.decode.on_error=skip
    metrics = {
        "predict/samples": float(len(rows)),
        "predict/unreadable": float(ledger.count if ledger is not None else 0),
    }
    write_json(session.out / "metrics.json", metrics)
    log.info(
        "predict: %d images -> %s%s",
        len(rows),
        session.out / "predictions.csv",
        f" ({ledger.summary()})" if ledger is not None and ledger.count else "",
    )
    if labeller.multi_label:
        log.info(
            "multi-label: labels = classes scoring above %g; scores = name:score|... in class "
            "order (%s)",
            labeller.threshold,
            "|".join(labeller.classes),
        )
    return metrics
