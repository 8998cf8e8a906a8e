"""A training checkpoint as the start of mode=eval, mode=predict and `load_model`: the file a
path means, the config saved in it, and the config a run works with (the checkpoint's, with
the keys set on the command line taken from there instead).

A checkpoint may come from elsewhere: `read_checkpoint`, which all three go through, checks it
as hostile input. Its config may not run a command nor reach the network (`pipe:` sources and
URLs are refused, downloads turned off with a note) unless the command line sets that key;
its counts and weights must be ones train.py writes; and `run_config` takes the limits
(`dataset.decode.max_image_pixels`, `dataset.decode.max_jpeg_scans`) from this run's config, never from the
checkpoint's."""

from __future__ import annotations

import copy
import logging
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from braceexpand import UnbalancedBracesError, braceexpand
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig, OmegaConf

from engine.config.tree import FILLED_FROM_DATA
from engine.data.decode_policy import move_old_keys
from engine.data.image_header import PILLOW_MAX_PIXELS
from engine.data.shards.sources import kind
from engine.inference.moved_targets import moved_targets
from engine.runs.checkpoint_checks import bad_weight, malformed
from engine.runs.checkpoint_files import CheckpointError, load_checkpoint
from engine.runs.checkpoint_weights import picked_weights
from engine.runs.outputs import DATA_KEY

log = logging.getLogger(__name__)

# What a run on a checkpoint takes from it (the rest, e.g. mode, paths, eval, predict and
# allowed_targets, comes from this run's config): the data and its pipelines, the model, the
# loss and metrics it was measured by, the loader and the device settings of the training.
CARRIED = ("dataset", "transforms", "model", "loss", "metrics", "loader", "trainer", DATA_KEY)
# What of it mode=eval builds (the data's values are only read): checked for what would run a
# command or reach the network (`read_checkpoint`).
BUILT = tuple(section for section in CARRIED if section != DATA_KEY)
MAX_VALUES = 1_000_000  # values a saved config may hold (classes included)
MAX_DEPTH = 64  # and how deep it may nest
MAX_NAMES = 100_000  # names its brace patterns may expand to, all together (a range of
# ranges, 12 x {0..9}, stands for 10**12 and took as long to check)
# Settings that make a build reach the network, and the value that builds offline instead:
# torchvision's model builders download `weights` (the checkpoint's own weights replace them
# anyway), torchvision's datasets `download` their files. A key -> (the targets it means,
# a prefix or several; "" = any), its offline value.
OFFLINE: dict[str, tuple[str | tuple[str, ...], Any]] = {
    "weights": (("torchvision.", "engine.models."), None),
    "weights_backbone": ("torchvision.", None),
    # model=torchvision and model=timm read a file their weights replace anyway
    "pretrained_file": ("engine.models.", None),
    "pretrained": ("", False),
    "pretrained_backbone": ("", False),
    "download": ("", False),
}
# A dataset's limits: a run on a checkpoint takes them from its own config (or the dataset
# kind's default), never from the checkpoint's, whose `null` would lift them.
LIMITS = ("decode.max_image_pixels", "decode.max_jpeg_scans", "max_row_group_bytes")
# Settings of a transform that make an image side (torchvision.transforms.v2's Resize and
# crops, Pad, ...): a saved one past the pixel limit would ask the allocator for terabytes.
SIDES = ("size", "max_size", "min_size", "target_size", "crop_size", "resize_size", "padding")
_MISSING = object()  # a key a config does not hold


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


def given(key: str, overrides: Sequence[str]) -> bool:
    """Whether the command line (`overrides`) set `key` or a node above it."""
    given = {text.lstrip("+~").partition("=")[0] for text in overrides}
    return any(key == g or key.startswith((f"{g}.", f"{g}[")) for g in given)


def _reach(name: str) -> str | None:
    """What shard source `name` does that a checkpoint may not choose: runs a command or
    reaches the network (a URL; a local path, a glob or file:// does neither)."""
    if kind(name) == "pipe":
        return "a pipe: source, which runs a shell command"
    if kind(name) != "local" and not name.lower().startswith("file://"):
        return "a URL, which reaches the network"
    return None


def _source_problem(value: str, key: str, budget: list[int], file: Path) -> str | None:
    """`_reach` of `value` (saved at `key`) or of any name it brace-expands to, as the engine
    expands shard names: `{pi,x}pe:cmd` holds no `pipe:` but expands to one. The expansions of
    the whole config share `budget`: past it `value` is refused, naming `key`."""
    found = _reach(value.strip())
    if found is not None or "{" not in value:
        return found
    try:
        for name in braceexpand(value):
            budget[0] -= 1
            if budget[0] < 0:
                raise CheckpointError(
                    f"{file}: its saved config sets {key}={value[:80]!r}, which (with its other "
                    f"brace patterns) expands to more than {MAX_NAMES:,} names; one from a "
                    f"checkpoint is not expanded. If you mean it, set {key} on the command line "
                    "(mode=eval, mode=predict)."
                )
            found = _reach(name.strip())
            if found is not None:
                return found
    except UnbalancedBracesError:  # refused as a shard list; the text was checked above
        return None
    return None


def refuse_saved_sources(
    saved: dict[str, Any], overrides: Sequence[str], file: Path, builds: Sequence[str]
) -> None:
    """A `pipe:` source (a shard list, a manifest) runs a shell command by design, a URL reads
    from the network: either may come from the user's own command line or config files, never
    from a checkpoint's saved config. One in a section the run `builds` that the command line
    did not set (`overrides`) is refused, naming the file, the key and the fix; what its brace
    patterns expand to counts."""
    budget = [MAX_NAMES]
    for section in builds:
        for key, value in _strings(saved.get(section), section):
            if given(key, overrides):
                continue
            found = _source_problem(value, key, budget, file)
            if found is not None:
                raise CheckpointError(
                    f"{file}: its saved config sets {key}={value[:200]!r}, {found}; one from a "
                    f"checkpoint is never used. If you mean it, set {key} on the command line "
                    "(mode=eval, mode=predict)."
                )


def _nodes(tree: Any, path: str) -> Iterator[tuple[str, dict[str, Any]]]:
    """(dotted key, node) of every dict under `tree`, `tree` itself first."""
    if isinstance(tree, dict):
        yield path, tree
        for key, value in tree.items():
            yield from _nodes(value, f"{path}.{key}")
    elif isinstance(tree, list):
        for i, value in enumerate(tree):
            yield from _nodes(value, f"{path}[{i}]")


def offline(
    saved: dict[str, Any], overrides: Sequence[str], file: Path, builds: Sequence[str]
) -> dict[str, Any]:
    """`saved` with the settings that would reach the network when the run `builds` its
    sections (`OFFLINE`: model weights to download, a dataset's `download`) at their offline
    values, each in one warning line, unless the command line set that key (`overrides`)."""
    saved = copy.deepcopy(saved)
    for section in builds:
        for path, node in _nodes(saved.get(section), section):
            target = node.get("_target_")
            for name, (prefix, off) in OFFLINE.items():
                key = f"{path}.{name}"
                if (
                    node.get(name) not in (None, False, off)
                    and isinstance(target, str)
                    and target.startswith(prefix)
                    and not given(key, overrides)
                ):
                    # the model's weights are the checkpoint's own: that is news, no warning
                    (log.info if section == "model" else log.warning)(
                        "%s: its saved %s=%r would reach the network; built with %s=%r instead "
                        "(a checkpoint's config never downloads; its weights are its own). Set "
                        "%s on the command line (mode=eval, mode=predict) if you mean it.",
                        file,
                        key,
                        node[name],
                        key,
                        off,
                        key,
                    )
                    node[name] = off
    return saved


def check_state(state: dict[str, Any], file: Path) -> None:
    """The counts a checkpoint holds (`epoch`, `step`; a huge one failed inside TensorBoard)
    and its weights (NaN ones score every input NaN) are ones train.py writes, or a
    CheckpointError names the file, the field and the fix."""
    for key in ("epoch", "step"):
        problem = malformed(state, key) if key in state else None
        if problem is not None:
            raise CheckpointError(
                f"{file}: {problem}: it was not written by train.py; use a checkpoint of a "
                "training run."
            )
    weights, _ = picked_weights(state)  # the ones a run on it uses
    problem = bad_weight(weights) if isinstance(weights, dict) else None
    if problem is not None:
        raise CheckpointError(
            f"{file}: {problem}: use an earlier checkpoint of that run (its checkpoints/"
            "step*.pt), or train again."
        )


@dataclass(frozen=True)
class Checkpoint:
    """A checkpoint read as hostile input (`read_checkpoint`): its file, its state, and its
    saved config checked and built offline."""

    file: Path
    state: dict[str, Any]
    config: dict[str, Any]


def read_checkpoint(
    path: str | Path, key: str, builds: Sequence[str], overrides: Sequence[str] = ()
) -> Checkpoint:
    """The checkpoint `path` (given by config key `key`) means, read as hostile input, as
    mode=eval, mode=predict and `load_model` all read one: loaded without running code, its
    counts and weights checked (`check_state`), its saved config plain data
    (`saved_config`) whose sections the run `builds` run no command and reach no network
    (`refuse_saved_sources`, `offline`) unless the command line (`overrides`) sets that key."""
    file = checkpoint_file(path, key)
    state = load_checkpoint(file)
    check_state(state, file)
    saved = saved_config(state, file)
    refuse_saved_sources(saved, overrides, file, builds)
    return Checkpoint(file, state, offline(saved, overrides, file, builds))


def image_sides(transforms: Any, limit: int | None, file: Path) -> None:
    """Refuse a transform in `transforms` (a saved config's) that makes an image side whose
    square is past the pixel `limit` (dataset.decode.max_image_pixels, at least Pillow's default:
    a small limit on inputs does not forbid resizing them up; None: no limit), naming `file`
    and the key: a saved Resize(size=10**6) asked the allocator for 3 TB at the first image."""
    if limit is None:
        return
    limit = max(limit, PILLOW_MAX_PIXELS)
    for path, node in _nodes(transforms, "transforms"):
        for name in SIDES:
            sides = _ints(node.get(name))
            if sides and max(sides) ** 2 > limit:
                raise CheckpointError(
                    f"{file}: its saved {path}.{name}={node[name]!r} makes images of "
                    f"{max(sides) ** 2:,} pixels, past the limit of {limit:,} "
                    "(dataset.decode.max_image_pixels): its config was changed after training, or "
                    "(mode=eval, mode=predict) set a larger dataset.decode.max_image_pixels."
                )


def _ints(value: Any) -> list[int]:
    """The ints of `value` (one, or a list of them, nested), bools left out."""
    if isinstance(value, list):
        return [i for item in value for i in _ints(item)]
    return [value] if isinstance(value, int) and not isinstance(value, bool) else []


def run_config(
    cfg: DictConfig,
    saved: dict[str, Any],
    overrides: Sequence[str],
    file: str | Path = "the checkpoint",
) -> DictConfig:
    """The config of an eval or predict run: `saved` (checkpoint `file`'s config) for the
    `CARRIED` sections, except the keys the command line set (`overrides`, e.g.
    `dataset.root=...` or a whole `dataset=csv`), which come from `cfg` as composed;
    everything else from `cfg`. The data's values (`data`: classes, input shape) always stay
    the checkpoint's; the dataset's limits (`LIMITS`) are this run's (`_own_limits`)."""
    current = OmegaConf.to_container(cfg, resolve=True)
    move_old_keys(saved.get("dataset"), f"{file}'s saved config (mapped on read)")
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
    _filled_from_data(merged, saved)
    _own_limits(merged, current, overrides, file)  # type: ignore[arg-type]
    return OmegaConf.create(merged)  # type: ignore[arg-type]


def _filled_from_data(merged: dict[str, Any], saved: dict[str, Any]) -> None:
    """A model node the command line gave again (`model=mlp`, the training's own override)
    comes without the values training filled in from the data (num_classes, input_shape,
    vocab_size: `???`): they are the checkpoint's, as its weights are. Such a run stopped with
    a raw `MissingMandatoryValue: num_classes`."""
    ours, theirs = merged.get("model"), saved.get("model")
    if not isinstance(ours, dict) or not isinstance(theirs, dict):
        return
    for key in FILLED_FROM_DATA:
        if ours.get(key) == "???" and key in theirs:
            ours[key] = copy.deepcopy(theirs[key])


def _own_limits(
    merged: dict[str, Any], current: dict[str, Any], overrides: Sequence[str], file: str | Path
) -> None:
    """Each `LIMITS` key of the merged dataset (its sources' too) that the command line did not
    set becomes this run's: `current`'s value at that key, else its dataset's, else none (the
    dataset kind's default); a saved value it replaces is named in one warning line."""
    ours = current.get("dataset")
    for path, node in _nodes(merged.get("dataset"), "dataset"):
        for name in LIMITS:
            key, saved = f"{path}.{name}", _lookup(node, name)
            if saved is _MISSING or given(key, overrides):
                continue
            value = _lookup(current, key)
            if value is _MISSING and isinstance(ours, dict):
                value = _lookup(ours, name)
            if value is not _MISSING and saved == value:
                continue
            log.warning(
                "%s: its saved %s=%r is not taken (a checkpoint never sets a limit): this "
                "run's %s applies; set %s on the command line to change it.",
                file,
                key,
                saved,
                "dataset kind's default" if value is _MISSING else repr(value),
                key,
            )
            _set(node, name, None if value is _MISSING else value, delete=value is _MISSING)


def _lookup(tree: dict[str, Any], dotted: str) -> Any:
    """The value at `dotted` (keys only) in `tree`, or _MISSING."""
    for part in dotted.split("."):
        if not isinstance(tree, dict) or part not in tree:
            return _MISSING
        tree = tree[part]
    return tree
