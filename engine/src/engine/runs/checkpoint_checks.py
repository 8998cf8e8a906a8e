"""Whether a loaded training checkpoint can be restored into this run: every key the restore
reads is there with the type (and range) it must have, the weights and the optimizer state
fit this run's model and optimizer, and the classes are the data's. Checked before anything
is restored, so a malformed file is named (or, under trainer.resume=auto, skipped) instead of
failing deep inside torch."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any, TypedDict

import torch
from torch.optim import Optimizer

from engine.core.bounds import Finite
from engine.core.records import Open, problem
from engine.core.text import first_few
from engine.runs.checkpoint_weights import EMA_KEY
from engine.runs.run_records import RECORDS, AtLeastOne, Counted, position_problem

# Optimizer state that is not shaped like its parameter: torch.optim.Adafactor's row and
# column statistics (the parameter's shape with 1 in the last or second-to-last dimension).
FACTORED = ("row_var", "col_var")


class _Group(TypedDict):
    params: list[Any]


class OptimizerState(TypedDict):
    state: dict[Any, Any]
    param_groups: list[Annotated[_Group, Open()]]


class _Rank(TypedDict):
    rng: Any
    totals: Any


class _Ema(TypedDict):
    weights: dict[str, Any]
    updates: Counted


# what engine/runs/summary.py reads from every epoch of the history
HISTORY_KEYS = {"train/epoch_s", "train/data_wait_frac", "train/first_batch_s"}

# What `Checkpointer.restore` reads from a checkpoint, each key -> its schema
# (engine/core/records.py): a file without one of these, or with one that is not its schema,
# is refused before anything is restored (`config_key` besides: trainer.resume=auto matches on
# it).
EXPECTED: dict[str, Any] = {
    "model": dict[str, Any],
    "optimizer": Annotated[OptimizerState, Open()],
    "scheduler": dict[str, Any],
    "scaler": dict[str, Any] | None,
    "epoch": AtLeastOne,
    "batches_done": Counted | None,
    "step": Counted,
    "nonfinite": Counted,
    "window": tuple[torch.Tensor, Counted],
    "history": list[dict[str, float]],  # one per epoch, alike in their keys (_odd)
    "ranks": list[Annotated[_Rank, Open()]],  # one per rank, at least one (_odd)
    "best": Finite | None,
}
REQUIRED_KEYS = tuple(EXPECTED)
# Read when present: the train step's own state (its state_dict(): an EMA, a second optimizer),
# which checkpoints written before engine 2.0 lack.
STEP_KEY = "train_step"
# And what the checkpoint records of its run and position (engine/runs/run_records.py).
OPTIONAL: dict[str, Any] = {
    STEP_KEY: dict[str, Any],
    EMA_KEY: Annotated[_Ema, Open()] | None,  # trainer.ema.decay
    **RECORDS,
}


def _odd(state: dict[str, Any]) -> str | None:
    """What in a state of the right types contradicts itself, or None."""
    history = state["history"]
    if history and any(
        e.keys() != history[0].keys() or not e.keys() >= HISTORY_KEYS for e in history
    ):
        return (
            f"its history holds epochs of other keys than {sorted(HISTORY_KEYS)}, alike in "
            "every epoch"
        )
    if not state["ranks"]:
        return "its ranks is [], where a training checkpoint holds one entry per rank"
    return position_problem(state)


@dataclass(frozen=True)
class RunShape:
    """What a checkpoint must fit to be restored into this run: the model's state dict, the
    optimizer's parameter shapes (one list per param group) and the data's classes."""

    model: dict[str, Any]
    params: list[list[tuple[int, ...]]] | None = None
    classes: list[str] | None = None

    @classmethod
    def of(cls, model: torch.nn.Module, optimizer: Optimizer, classes: list[str]) -> RunShape:
        """This run's model, optimizer and classes."""
        params = [[tuple(p.shape) for p in g["params"]] for g in optimizer.param_groups]
        return cls(model.state_dict(), params, list(classes))


def malformed(state: dict[str, Any], key: str) -> str | None:
    """Why `state[key]` (one of EXPECTED's keys) is not what a training checkpoint holds there,
    naming the key and what it must be; None when it is."""
    return problem(state[key], EXPECTED[key], key)


# The tensors a weights file may hold: what torch.save and safetensors write of a model's state
WEIGHT_DTYPES = {
    torch.float16,
    torch.bfloat16,
    torch.float32,
    torch.float64,
    torch.int64,
    torch.int32,
    torch.int16,
    torch.int8,
    torch.uint8,
    torch.bool,
}


def bad_weight(weights: dict[str, Any]) -> str | None:
    """Why the weights in `weights` cannot be loaded, naming the first that cannot (None:
    they can): a tensor of a kind no model state holds (float8, complex, sparse, on the meta
    device), a view larger than the data it has (a stride-0 expand: a 1 KB file asking for
    terabytes when checked), or floating-point values of NaN or inf (such a model scores
    every input NaN). One check for every door weights come in by: a checkpoint to resume or
    evaluate, a pretrained file, a hub's cache."""
    for key, value in weights.items():
        if not isinstance(value, torch.Tensor):
            continue
        if (
            value.layout != torch.strided
            or value.device.type != "cpu"
            or value.dtype not in WEIGHT_DTYPES
        ):
            kind = f"{value.dtype}, {value.layout}, on {value.device.type}"
            return f"its weight {key} is a tensor of a kind no model state holds ({kind})"
        if value.numel() * value.element_size() > value.untyped_storage().nbytes():
            return (
                f"its weight {key} is a view of {value.numel():,} values over a storage of "
                f"{value.untyped_storage().nbytes():,} bytes (an expand): no model state holds one"
            )
        if value.is_floating_point() and not bool(torch.isfinite(value).all()):
            return (
                f"its weight {key} holds NaN or infinite values (the training diverged before "
                "it was saved)"
            )
    return None


def _shape(value: Any) -> tuple[int, ...] | None:
    return tuple(value.shape) if isinstance(value, torch.Tensor) else None


def weights_problem(saved: dict[str, Any], model: dict[str, Any]) -> str | None:
    """Why weights `saved` do not fit a model of state dict `model` (names and shapes; a
    model on the meta device will do), or None."""
    problems = [f"{k} missing" for k in model if k not in saved]
    problems += [f"{k} unexpected" for k in saved if k not in model]
    problems += [
        f"{k} is {list(_shape(saved[k]) or [])} in the file, {list(_shape(v) or [])} here"
        for k, v in model.items()
        if k in saved and _shape(saved[k]) != _shape(v)
    ]
    if not problems:
        return None
    more = f" (and {len(problems) - 3} more)" if len(problems) > 3 else ""
    return (
        f"its weights do not fit this model ({'; '.join(problems[:3])}{more}): it was "
        "written for another model"
    )


def _fits(name: str, value: Any, shape: tuple[int, ...]) -> bool:
    """Whether optimizer state `name` of a parameter of `shape` may be `value`."""
    if not isinstance(value, torch.Tensor) or value.dim() == 0:
        return True  # numbers and scalar tensors (step, Adam's step, ASGD's eta and mu)
    if name in FACTORED:
        ours = torch.Size(shape)
        return value.dim() == len(shape) and torch.broadcast_shapes(value.shape, ours) == ours
    return tuple(value.shape) == shape


def _optimizer_problem(saved: dict[str, Any], params: list[list[tuple[int, ...]]]) -> str | None:
    groups = [len(g["params"]) for g in saved["param_groups"]]
    if groups != [len(g) for g in params]:
        return (
            f"its optimizer state has param groups of {groups} parameters, this run's optimizer "
            f"{[len(g) for g in params]}: it was written for another model or optimizer, or "
            "other parameter groups (optimizer.no_decay_norm_bias, optimizer.layer_decay; a "
            "run from before engine 2.3.0 with weight decay resumes with "
            "optimizer.no_decay_norm_bias=false)"
        )
    shapes = {
        i: shape
        for group, ours in zip(saved["param_groups"], params, strict=True)
        for i, shape in zip(group["params"], ours, strict=True)
    }
    for i, entry in saved["state"].items():
        if i not in shapes or not isinstance(entry, dict):
            return f"its optimizer state has an entry {i!r} that is no parameter's"
        for name, value in entry.items():
            if not _fits(name, value, shapes[i]):
                return (
                    f"its optimizer state does not fit this model: {name} of parameter {i} is "
                    f"{list(value.shape)} in the file, the parameter {list(shapes[i])} here"
                )
    return None


def problem_with(state: dict[str, Any], run: RunShape | None = None) -> str | None:
    """Why `state` cannot be restored into this run (None: it can): a key the restore reads
    is missing or of the wrong type or range; or (given `run`) its weights, its optimizer
    state or its classes do not fit this run's model, optimizer and data."""
    missing = [k for k in REQUIRED_KEYS if k not in state]
    if missing:
        return (
            f"is not a training checkpoint of this project: it lacks {missing} (one holds "
            f"{list(REQUIRED_KEYS)})"
        )
    schemas = EXPECTED | {key: schema for key, schema in OPTIONAL.items() if key in state}
    wrong = next(filter(None, (problem(state[k], s, k) for k, s in schemas.items())), None)
    wrong = wrong or _odd(state)
    if wrong is not None:
        return f"is malformed: {wrong}"
    weights = [state["model"], *([state[EMA_KEY]["weights"]] if state.get(EMA_KEY) else [])]
    nonfinite = next(filter(None, map(bad_weight, weights)), None)
    if nonfinite is not None:
        return f"is unusable: {nonfinite}; resume from an earlier step, or start fresh"
    if run is None:
        return None
    unfit = next(filter(None, (weights_problem(w, run.model) for w in weights)), None)
    unfit = _fit_problem(state, run, unfit)
    return None if unfit is None else f"does not fit this run: {unfit}"


def _fit_problem(state: dict[str, Any], run: RunShape, problem: str | None) -> str | None:
    """Why `state`'s optimizer state or classes do not fit `run` (its weights' `problem`
    first), or None."""
    if problem is None and run.params is not None:
        problem = _optimizer_problem(state["optimizer"], run.params)
    if problem is None and run.classes is not None and state.get("classes") != run.classes:
        theirs = state.get("classes")
        shown = f"[{first_few(theirs, 8, repr)}]" if isinstance(theirs, list) else repr(theirs)
        problem = (
            f"its classes {shown} are not the data's [{first_few(run.classes, 8, repr)}]: it "
            "was trained on other data (point dataset.* at that data, or start fresh)"
        )
    return problem
