"""What a checkpoint records of the run that wrote it, checked as hostile input before a resume
reads it: the topology, the sampler and the train listing (engine/runs/elastic.py), the
position in the epoch (`samples_done`), a stream's trained samples (engine/runs/
stream_resume.py) and the older engines' `world_size` / `num_workers`. A hand edit or a forged
file is refused in one line naming the key, never a raw TypeError deep in a resume."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

# The most a count (epoch, step, batches) may be: past it a float (JSON, a plot's axis) no
# longer holds it exactly, and past 2**63 TensorBoard's int64 step fails deep in protobuf.
MAX_COUNT = 2**53
STREAM_TRAINED = "stream_trained"  # a stream's trained samples (engine/runs/stream_resume.py)


def count(value: Any, least: int = 0) -> bool:
    """Whether `value` is an int (not a bool) in `least`..MAX_COUNT."""
    return isinstance(value, int) and not isinstance(value, bool) and least <= value <= MAX_COUNT


def _fields(value: Any, tests: dict[str, Callable[[Any], bool]], optional: tuple = ()) -> bool:
    """Whether `value` is a dict of exactly `tests`' keys (those in `optional` may be absent),
    each passing its test."""
    if not isinstance(value, dict) or not set(tests) - set(optional) <= value.keys() <= set(tests):
        return False
    return all(test(value[key]) for key, test in tests.items() if key in value)


def _topology(value: Any) -> bool:
    return _fields(
        value,
        {
            "world_size": lambda v: count(v, 1),
            "num_workers": count,
            "batch_size": lambda v: v is None or count(v, 1),
            "grad_accum": lambda v: count(v, 1),
        },
    )


def _source(value: Any) -> bool:
    """[name, size, share] of a mix's source."""
    return (
        isinstance(value, list)
        and len(value) == 3
        and isinstance(value[0], str)
        and count(value[1])
        and isinstance(value[2], int | float)
        and not isinstance(value[2], bool)
        and 0 <= value[2] <= 1
    )


def _sampler(value: Any) -> bool:
    return _fields(
        value,
        {
            "kind": lambda v: isinstance(v, str),
            "seed": lambda v: isinstance(v, int | float | str | type(None)),  # a stream's own
            "draws": lambda v: v is None or count(v),
            "replacement": lambda v: isinstance(v, bool),
            "sources": lambda v: isinstance(v, list) and all(map(_source, v)),
        },
        optional=("replacement", "sources"),
    )


def _digest(value: Any) -> bool:
    return value is None or isinstance(value, str)


def _data(value: Any) -> bool:
    return _fields(value, {"size": count, "files": _digest, "labels": _digest})


def _trained(value: Any) -> bool:
    """None, or {epoch, size, bits (the packed bool per split index), replayable}."""
    if value is None:
        return True
    shape = _fields(
        value,
        {
            "epoch": lambda v: count(v, 1),
            "size": count,
            "bits": lambda v: isinstance(v, torch.Tensor) and v.dtype == torch.uint8,
            "replayable": lambda v: isinstance(v, bool),
        },
        optional=("replayable",),  # before engine 2.1
    )
    return shape and value["bits"].dim() == 1 and len(value["bits"]) == (value["size"] + 7) // 8


def _config(value: Any) -> bool:
    """The saved config as far as a resume reads it: its loader and trainer sections and
    trainer.limit_train_batches."""
    if not isinstance(value, dict):
        return False
    loader, trainer = value.get("loader", {}), value.get("trainer", {})
    if not (isinstance(loader, dict) and isinstance(trainer, dict)):
        return False
    limit = trainer.get("limit_train_batches")
    return limit is None or count(limit, 1)


def topology_problem(topology: dict[str, Any]) -> str | None:
    """Why `topology` (a Topology's fields) is none a job can have, naming its fields."""
    if _topology(topology):
        return None
    return f"its topology {topology} is not {RECORDS['topology'][1]}"


# key -> (its test, what it must be): read when present (older checkpoints lack them)
RECORDS: dict[str, tuple[Callable[[Any], bool], str]] = {
    "topology": (
        _topology,
        "a dict of exactly world_size (int >= 1), num_workers (int >= 0), batch_size "
        "(int >= 1 or None) and grad_accum (int >= 1)",
    ),
    "sampler": (
        _sampler,
        "a dict of kind (str), seed (a number, a string or None), draws (int >= 0 or None) and, where the "
        "sampler has them, replacement (bool) and sources ([name, size, share] each)",
    ),
    "data": (
        _data,
        "a dict of exactly size (int >= 0), files and labels (each a hash string or None)",
    ),
    "samples_done": (lambda v: v is None or count(v), "None or an int >= 0 (up to 2**53)"),
    STREAM_TRAINED: (
        _trained,
        "None or a dict of epoch (int >= 1), size (int >= 0), bits (a uint8 tensor of "
        "(size + 7) // 8 bytes) and replayable (bool)",
    ),
    "config": (
        _config,
        "the run's resolved config: a dict whose loader and trainer are dicts, and "
        "trainer.limit_train_batches None or an int >= 1",
    ),
    "world_size": (lambda v: count(v, 1), "an int >= 1"),
    "num_workers": (count, "an int >= 0"),
}


def position_problem(state: dict[str, Any]) -> str | None:
    """Why the checkpoint's position in its epoch contradicts itself (None: it does not): an
    epoch's end (batches_done None) has no samples_done, and a stream's trained samples are of
    the epoch it stopped in."""
    if state["batches_done"] is None and state.get("samples_done") is not None:
        return (
            f"its 'samples_done' is {state['samples_done']} at an epoch's end (batches_done "
            "None), where a training checkpoint holds None"
        )
    trained = state.get(STREAM_TRAINED)
    if trained is not None and (
        state["batches_done"] is None or trained["epoch"] != state["epoch"]
    ):
        return (
            f"its 'stream_trained' is of epoch {trained['epoch']}, where a training checkpoint "
            f"holds the samples of the epoch it stopped in mid-way ({state['epoch']}) or None"
        )
    return None
