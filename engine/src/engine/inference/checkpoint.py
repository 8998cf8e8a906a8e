"""A training checkpoint as the start of mode=eval, mode=predict and `load_model`: the file a
path means, the config saved in it, and the config a run works with (the checkpoint's, with
the keys set on the command line taken from there instead)."""

from __future__ import annotations

import copy
import itertools
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from braceexpand import UnbalancedBracesError, braceexpand
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig, OmegaConf

from engine.data.shards.sources import kind
from engine.inference.moved_targets import moved_targets
from engine.runs.checkpoint_files import CheckpointError
from engine.runs.outputs import DATA_KEY

# What a run on a checkpoint takes from it (the rest, e.g. mode, paths, eval, predict and
# allowed_targets, comes from this run's config): the data and its pipelines, the model, the
# loss and metrics it was measured by, the loader and the device settings of the training.
CARRIED = ("dataset", "transforms", "model", "loss", "metrics", "loader", "trainer", DATA_KEY)
MAX_VALUES = 1_000_000  # values a saved config may hold (classes included)
MAX_DEPTH = 64  # and how deep it may nest


def checkpoint_file(path: str | Path, key: str) -> Path:
    """The checkpoint `path` means: a file itself; a run dir (or its checkpoints/ folder) its
    best.pt, else its last.pt. `key` is the config key that gave `path`, named in errors."""
    given = Path(path).expanduser()
    if given.is_file():
        return given
    if not given.is_dir():
        raise CheckpointError(
            f"{key}={path}: no such file or folder; give a checkpoint (.pt) or a run dir."
        )
    folder = given / "checkpoints" if (given / "checkpoints").is_dir() else given
    for name in ("best.pt", "last.pt"):
        if (folder / name).is_file():
            return folder / name
    raise CheckpointError(
        f"{key}={path}: {folder} holds no best.pt or last.pt; give a checkpoint file, or the "
        "dir of a run that finished at least one epoch."
    )


def _plain(tree: Any, path: str, file: Path, budget: list[int], depth: int = 0) -> Any:
    """`tree` as plain config data (dicts with string keys, lists, strings, numbers, bools,
    None; a tuple becomes a list, as OmegaConf would make it), or a CheckpointError naming
    `file` and the key: anything else, nesting past MAX_DEPTH, or more than the `budget` of
    values (counted per visit, so a tree that shares its lists cannot multiply)."""
    budget[0] -= 1
    if budget[0] < 0 or depth > MAX_DEPTH:
        raise CheckpointError(
            f"{file}: its saved config holds more than {MAX_VALUES:,} values or nests deeper "
            f"than {MAX_DEPTH} (at {path or 'the top'}): it was not written by train.py."
        )
    if isinstance(tree, dict):
        bad = next((k for k in tree if not isinstance(k, str)), None)
        if bad is not None:
            raise CheckpointError(f"{file}: its saved config has a key {bad!r} under {path}.")
        return {
            k: _plain(v, f"{path}.{k}" if path else k, file, budget, depth + 1)
            for k, v in tree.items()
        }
    if isinstance(tree, list | tuple):
        return [_plain(v, f"{path}[{i}]", file, budget, depth + 1) for i, v in enumerate(tree)]
    if tree is None or isinstance(tree, str | int | float | bool):
        return tree
    raise CheckpointError(
        f"{file}: its saved config holds a {type(tree).__name__} at {path}, where a config "
        "holds strings, numbers and lists: it was not written by train.py."
    )


def _check_classes(config: dict[str, Any], file: Path) -> None:
    """The classes name the model's outputs: a list of distinct names, one per output."""
    classes = config[DATA_KEY].get("classes") if isinstance(config[DATA_KEY], dict) else None
    outputs = config["model"].get("num_classes") if isinstance(config["model"], dict) else None
    ok = isinstance(classes, list) and all(isinstance(c, str) for c in classes)
    if (
        not ok
        or len(set(classes)) != len(classes)
        or (outputs is not None and outputs != len(classes))
    ):
        raise CheckpointError(
            f"{file}: its saved {DATA_KEY}.classes must be distinct names, one per output of "
            f"the model (model.num_classes={outputs!r}); it holds {str(classes)[:80]}."
        )


def saved_config(state: dict[str, Any], file: Path) -> dict[str, Any]:
    """The training config saved in checkpoint `state` (read from `file`), with the values
    the training took from its data: as plain data, checked before anything reads it."""
    config = state.get("config")
    if isinstance(config, dict):
        config = _plain(config, "", file, [MAX_VALUES])
    if not isinstance(config, dict) or not {"model", "transforms"} <= config.keys():
        raise CheckpointError(
            f"{file} holds no training config: it is not a checkpoint written by train.py "
            "(mode=train) of this project."
        )
    if not isinstance(config["model"], dict) or config["model"].get("_partial_"):
        raise CheckpointError(
            f"{file}: its saved model config is not a model's node (a _target_ called with "
            "its settings): it was not written by train.py."
        )
    unfilled = [key for key, value in config["model"].items() if value == "???"]
    if unfilled or DATA_KEY not in config:
        raise CheckpointError(
            f"{file} predates self-contained checkpoints (its config leaves "
            f"model.{(unfilled or ['num_classes'])[0]} to the data): retrain it with this "
            "version of train.py."
        )
    _check_classes(config, file)
    for key, value in _strings(config, ""):
        if "${" in value:
            raise CheckpointError(
                f"{file}: its saved config holds an interpolation, {key}={value!r}; train.py "
                "saves configs resolved, so this one was changed after it was written, and "
                "nothing in it is resolved (a resolver can read the environment or write files)."
            )
    return moved_targets(config, file)


def task_overrides() -> list[str]:
    """The command line's overrides (none when the config was composed outside train.py)."""
    return list(HydraConfig.get().overrides.task) if HydraConfig.initialized() else []


def _set(tree: dict[str, Any], dotted: str, value: Any, delete: bool) -> None:
    *parents, leaf = dotted.split(".")
    for part in parents:
        tree = tree.setdefault(part, {})
    if delete:
        tree.pop(leaf, None)
    else:
        tree[leaf] = copy.deepcopy(value)


def _strings(tree: Any, path: str) -> Iterator[tuple[str, str]]:
    """(dotted key, value) of every string under `tree` (list items by index)."""
    if isinstance(tree, dict):
        for key, value in tree.items():
            yield from _strings(value, f"{path}.{key}" if path else str(key))
    elif isinstance(tree, list):
        for i, value in enumerate(tree):
            yield from _strings(value, f"{path}[{i}]")
    elif isinstance(tree, str):
        yield path, tree


def _runs_a_command(value: str) -> bool:
    """Whether shard source `value` holds, or brace-expands to, a `pipe:` command."""
    if "pipe:" in value:
        return True
    try:  # the first expansions only: a range can stand for billions
        names = list(itertools.islice(braceexpand(value), 1000))
    except UnbalancedBracesError:
        return False
    return any(kind(name.strip()) == "pipe" for name in names)


def refuse_saved_commands(saved: dict[str, Any], overrides: Sequence[str], file: Path) -> None:
    """A `pipe:` source (a shard list, a manifest) runs a shell command by design: it may come
    from the user's own command line or config files, never from a checkpoint's saved config.
    One the command line did not set is refused, naming the file, the key and the fix."""
    given = {text.lstrip("+~").partition("=")[0] for text in overrides}
    for section in CARRIED:
        for key, value in _strings(saved.get(section), section):
            if _runs_a_command(value) and not any(
                key == g or key.startswith((f"{g}.", f"{g}[")) for g in given
            ):
                raise CheckpointError(
                    f"{file}: its saved config sets {key}={value!r}, a pipe: source, which runs "
                    "a shell command; one from a checkpoint is never run. If you mean it, set "
                    f"{key} on the command line."
                )


def run_config(cfg: DictConfig, saved: dict[str, Any], overrides: Sequence[str]) -> DictConfig:
    """The config of an eval or predict run: `saved` (a checkpoint's config) for the `CARRIED`
    sections, except the keys the command line set (`overrides`, e.g. `dataset.root=...` or a
    whole `dataset=csv`), which come from `cfg` as composed; everything else from `cfg`. The
    data's values (`data`: classes, input shape) always stay the checkpoint's."""
    current = OmegaConf.to_container(cfg, resolve=True)
    merged = copy.deepcopy(current)
    for section in CARRIED:
        merged[section] = copy.deepcopy(saved[section])  # type: ignore[index]
    for text in overrides:
        dotted = text.lstrip("+~").partition("=")[0]
        if dotted.split(".")[0] not in CARRIED or dotted.split(".")[0] == DATA_KEY:
            continue
        value = OmegaConf.select(OmegaConf.create(current), dotted)
        value = OmegaConf.to_container(value) if OmegaConf.is_config(value) else value
        _set(merged, dotted, value, delete=text.startswith("~"))  # type: ignore[arg-type]
    return OmegaConf.create(merged)  # type: ignore[arg-type]
