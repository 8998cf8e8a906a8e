"""The composed config as plain, resolved values, and the `_target_` nodes in it."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from omegaconf import DictConfig, ListConfig, OmegaConf
from omegaconf.errors import InterpolationResolutionError

MISSING = "???"  # what a `???` key the data fills (exempt) resolves to
# The model keys taken from the data (a YAML leaves them `???`): build_model fills them, and the
# config checks exempt exactly these from their "required value" check.
FILLED_FROM_DATA = ("num_classes", "input_shape", "vocab_size")


def child_key(path: str, key: Any) -> str:
    """`loader` + `batch_size` -> `loader.batch_size`; `transforms.train` + 0 -> `...train[0]`."""
    if isinstance(key, int):
        return f"{path}[{key}]"
    return f"{path}.{key}" if path else str(key)


def _raw(node: DictConfig | ListConfig, key: Any) -> Any:
    """The value as written (the interpolation text itself), for error messages."""
    return node._get_node(key)._value()  # type: ignore[union-attr]


def resolve_tree(
    node: DictConfig | ListConfig, exempt: set[str], problems: list[str], path: str = ""
) -> Any:
    """`node` as dicts/lists of resolved values; each `???` or failing interpolation becomes a
    line in `problems` (keys in `exempt` may stay `???`: they are filled in later)."""
    keys = list(node.keys()) if isinstance(node, DictConfig) else range(len(node))
    out: dict[Any, Any] = {}
    for key in keys:
        full = child_key(path, key)
        if OmegaConf.is_missing(node, key):
            if full not in exempt:
                problems.append(
                    f"{full}=??? is a required value that nothing set: set it in its YAML file "
                    f"or on the command line, e.g. {full}=<value>."
                )
            out[key] = MISSING
            continue
        try:
            value = node[key]
        except InterpolationResolutionError as err:
            reason = str(err).splitlines()[0]
            problems.append(
                f"{full}={_raw(node, key)}: the interpolation cannot be resolved ({reason}); "
                "point it at a key that exists, e.g. ${paths.data_dir}, or give a plain value."
            )
            continue
        if isinstance(value, (DictConfig, ListConfig)):
            value = resolve_tree(value, exempt, problems, full)
        out[key] = value
    return out if isinstance(node, DictConfig) else list(out.values())


def target_nodes(tree: Any, path: str = "") -> Iterator[tuple[str, dict[str, Any]]]:
    """Every dict with a `_target_` key in the resolved `tree`, parents before children."""
    items = tree.items() if isinstance(tree, dict) else enumerate(tree)
    if isinstance(tree, dict) and "_target_" in tree:
        yield path, tree
    for key, value in items:
        if isinstance(value, (dict, list)):
            yield from target_nodes(value, child_key(path, key))
