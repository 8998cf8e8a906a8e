"""`validate_config`: refuse a bad composed config in one short message, before any work.

In order: every value resolves (no `???`, no broken `${...}`); every `_target_` is admitted by
`allowed_targets` (before anything is imported: engine/config/allowlist.py); each target imports
and is what its entry admits (no re-export, module or plain value); each node's keys are
parameters of its target and its values fit their type hints (finite numbers included); the
settings dataclasses' own checks (`__post_init__`) pass.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from typing import Any

from hydra._internal.utils import _locate  # what instantiate uses; get_object logs an ERROR
from hydra.errors import InstantiationException
from hydra.utils import instantiate
from omegaconf import DictConfig

from engine.config.allowlist import after_import, check_entries, disallowed_targets, warn_if_widened
from engine.config.errors import ConfigError
from engine.config.label_kinds import label_kind_problems
from engine.config.schema import node_problems
from engine.config.tree import FILLED_FROM_DATA, child_key, resolve_tree, target_nodes
from engine.core.dataset_keys import FOLD_KEYS, is_dataset_node
from engine.core.failures import innermost
from engine.core.optimizer_keys import GROUP_KEYS, GROUP_TARGET, group_settings
from engine.core.text import closest
from engine.metric_keys import EMA_PREFIX, METRICS_BY_MODE, is_count, metric_names, train_keys

# per-epoch values a checkpoint can be ranked by (trainer.checkpoint.monitor), besides every
# metric of the metrics group as val/<name> and train/<name>
MONITORED_ALWAYS = ("val/loss", "train/loss", "train/samples_per_s")

# `???` keys that engine.training.models fills from the data
EXEMPT_MISSING = {f"model.{key}" for key in FILLED_FROM_DATA}
# Keys null by default that a mode needs, with what to set
CHECKPOINT = "a checkpoint file, or a run dir meaning its best.pt, else last.pt"
REQUIRED_BY_MODE = {
    "eval": {"checkpoint": CHECKPOINT},
    "predict": {
        "checkpoint": CHECKPOINT,
        "input": "a folder of images, a CSV with a path column, or one image file",
    },
}


def validate_config(cfg: DictConfig) -> None:
    """Raise one ConfigError listing what is wrong with `cfg` (one line per problem)."""
    problems: list[str] = []
    tree = resolve_tree(cfg, EXEMPT_MISSING, problems)
    _raise_if(problems)
    _raise_if(mode_problems(tree))
    entries = check_entries(tree)
    warn_if_widened(entries)
    _raise_if(disallowed_targets(tree, entries))
    targets = {}
    for path, node, obj in _admitted(tree, entries, problems):
        targets[path] = obj
        problems += key_problems(path, node, obj)
    _raise_if(problems)
    _raise_if(_label_kinds(tree, targets))
    _raise_if(monitor_problems(tree))
    for path, node in target_nodes(tree):
        if _is_settings(targets.get(path), node):
            problems += _settings_problem(path, node)
    _raise_if(problems)


def key_problems(path: str, node: dict[str, Any], obj: Any) -> list[str]:
    """The keys of target node `node` (at `path`, its target imported as `obj`) it does not
    take, and values that do not fit their type hints; a dataset node's fold keys and the
    optimizer's parameter-group keys are the engine's."""
    if path == "optimizer":
        own = {k: v for k, v in node.items() if k not in GROUP_KEYS}
        groups = {k: v for k, v in node.items() if k in GROUP_KEYS}
        return [
            *node_problems(path, own, node["_target_"], obj),
            *node_problems(path, groups, GROUP_TARGET, group_settings),
        ]
    keys = {k: v for k, v in node.items() if k not in FOLD_KEYS} if is_dataset_node(path) else node
    return node_problems(path, keys, node["_target_"], obj)


def _admitted(
    tree: dict[str, Any], entries: list[str], problems: list[str]
) -> Iterator[tuple[str, dict[str, Any], Any]]:
    """Each target node of `tree` as (path, node, its imported target) that `entries` admit;
    a line in `problems`, in order, for each that does not import or is refused."""
    for path, node in target_nodes(tree):
        target = node["_target_"]
        obj = _import(path, target, problems)
        if obj is None:
            continue
        where = after_import(child_key(path, "_target_"), target, obj, entries)
        if where is not None:
            problems.append(where)
        else:
            yield path, node, obj


def check_targets(
    tree: dict[str, Any], entries: list[str]
) -> list[tuple[str, dict[str, Any], Any]]:
    """Raise one ConfigError when a `_target_` in `tree` (a config that did not come from this
    checkout's YAML, e.g. a checkpoint's) is refused by `entries`: by name before anything is
    imported, then as imported (modules, values, re-exports, code runners). Else `_admitted`."""
    _raise_if(disallowed_targets(tree, entries))
    problems: list[str] = []
    admitted = list(_admitted(tree, entries, problems))
    _raise_if(problems)
    return admitted


def mode_problems(tree: dict[str, Any]) -> list[str]:
    """`mode` must be one of train.py's modes, `summary.rank_by` (when set) a metric of it, and
    the keys the mode needs (REQUIRED_BY_MODE) set."""
    mode, rank_by = tree.get("mode"), tree.get("summary", {}).get("rank_by")
    top = tree.get("summary", {}).get("top", 1)
    if mode not in METRICS_BY_MODE:
        close = closest(str(mode), list(METRICS_BY_MODE))
        hint = f" (did you mean mode={close}?)" if close else ""
        return [f"mode={mode!r}: expected one of {sorted(METRICS_BY_MODE)}{hint}."]
    if isinstance(top, bool) or not isinstance(top, int) or top < 1:
        return [f"summary.top={top!r}: expected an int >= 1 (rows printed), e.g. summary.top=10."]
    keys = train_keys(metric_names(tree.get("metrics", {}))) if mode == "train" else None
    keys = [key for key in keys or METRICS_BY_MODE[mode] if not is_count(key)]
    if rank_by is not None and rank_by not in keys:
        return [
            f"summary.rank_by={rank_by!r} is not a metric of mode={mode}: use one of {list(keys)}."
        ]
    return [
        f"{mode}.{key} is null: mode={mode} needs it ({REQUIRED_BY_MODE[mode][key]})."
        for key in REQUIRED_BY_MODE.get(mode, {})
        if tree.get(mode, {}).get(key) is None
    ]


def monitor_problems(tree: dict[str, Any]) -> list[str]:
    """trainer.checkpoint.monitor (which also drives early stopping), when set by hand, must be
    a per-epoch value of this run: a metric of the metrics group (val/map needs
    metrics=multilabel), a loss. Null follows the metrics group (resolve_monitor)."""
    trainer = tree.get("trainer", {})
    monitor = trainer.get("checkpoint", {}).get("monitor")
    names = metric_names(tree.get("metrics", {}))
    allowed = [*(f"{s}/{n}" for s in ("val", "train") for n in names), *MONITORED_ALWAYS]
    if (trainer.get("ema") or {}).get("decay") is not None:  # the EMA's scores (val/ema_acc)
        allowed += [f"{EMA_PREFIX}{n}" for n in (*names, "loss")]
    if monitor is None or monitor in allowed:
        return []
    close = closest(str(monitor), allowed)
    hint = f" (did you mean {close}?)" if close else ""
    return [
        f"trainer.checkpoint.monitor={monitor!r} is not a per-epoch value of this run{hint}: "
        f"expected one of {allowed} (the metrics group's metrics, as val/ and train/)."
    ]


def _label_kinds(tree: dict[str, Any], targets: dict[str, Any]) -> list[str]:
    """The loss and metrics against the labels the config says the data has: its
    dataset.multi_label key, else its dataset class's (the built split checks again, and
    alone where the class leaves it to the data: multi_label None)."""
    dataset, loss = targets.get("dataset"), targets.get("loss")
    if dataset is None or loss is None:
        return []
    multi = tree["dataset"].get("multi_label", getattr(dataset, "multi_label", False))
    if multi is None:  # the data decides (dataset=parquet: its label column's type)
        return []
    metrics = {n: targets[f"metrics.{n}"] for n in metric_names(tree.get("metrics", {}))}
    return label_kind_problems(bool(multi), loss, tree["loss"]["_target_"], metrics)


def _raise_if(problems: list[str]) -> None:
    if problems:  # a nested settings node can fail twice (alone and inside its parent)
        raise ConfigError("\n".join(dict.fromkeys(problems))) from None


def _import(path: str, target: str, problems: list[str]) -> Any:
    """The object `target` names, or None with a line in `problems`."""
    try:
        return _locate(target)
    except Exception as err:
        cause = err.__cause__ or err
        reason = f"{type(cause).__name__}: {str(cause).splitlines()[0] if str(cause) else ''}"
        problems.append(
            f"{child_key(path, '_target_')}={target}: cannot be imported ({reason}); expected "
            "the dotted path of a class or function: check the spelling and that its module "
            f"imports (python -c 'import {target.rpartition('.')[0] or target}')."
        )
        return None


def _is_settings(obj: Any, node: dict[str, Any]) -> bool:
    """A dataclass with its own checks: cheap to build now, so its errors come early."""
    return (
        isinstance(obj, type)
        and dataclasses.is_dataclass(obj)
        and hasattr(obj, "__post_init__")
        and not node.get("_partial_", False)
    )


def _settings_problem(path: str, node: dict[str, Any]) -> list[str]:
    """The settings check's own message (not Hydra's InstantiationException around it)."""
    try:
        instantiate(node)
    except InstantiationException as err:
        cause = innermost(err)
        message = str(cause).strip() or type(cause).__name__
        return [message if message.startswith(f"{path}.") else f"{path}: {message}"]
    return []
