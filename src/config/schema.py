"""A `_target_` node's keys and values against the target's signature (names and type hints)."""

from __future__ import annotations

import collections.abc as abc
import difflib
import inspect
import types
from typing import Any, Literal, Union, get_args, get_origin

HYDRA_KEYS = {"_target_", "_partial_", "_recursive_", "_convert_", "_args_"}
SEQUENCES = (list, tuple, abc.Sequence, abc.MutableSequence)
MAPPINGS = (dict, abc.Mapping, abc.MutableMapping)


def signature_of(obj: Any) -> inspect.Signature | None:
    """The call signature with evaluated annotations (left as strings, so unchecked, when they
    do not evaluate); None when Python cannot tell (some builtins)."""
    try:
        return inspect.signature(obj, eval_str=True)
    except ValueError:
        return None
    except Exception:  # an annotation that does not evaluate here
        pass
    try:
        return inspect.signature(obj)
    except (TypeError, ValueError):
        return None


def accepts(annotation: Any, value: Any) -> bool:
    """False only when `value` clearly is not an `annotation`; unknown annotations accept.

    Ints pass for float; numbers pass for str (the command line reads `32` as an int);
    a nested `_target_` node passes for anything (its own node is checked).
    """
    if annotation is inspect.Parameter.empty or annotation is Any or isinstance(annotation, str):
        return True
    if isinstance(value, dict) and "_target_" in value:
        return True
    if annotation is None or annotation is type(None):
        return value is None
    origin, args = get_origin(annotation), get_args(annotation)
    if origin in (Union, types.UnionType):
        return any(accepts(arg, value) for arg in args)
    if origin is Literal:
        return value in args
    if annotation is bool:
        return isinstance(value, bool)
    if annotation is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if annotation is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if annotation is str:
        return isinstance(value, (str, int, float)) and not isinstance(value, bool)
    base = origin or annotation
    if base in SEQUENCES:
        return isinstance(value, list) and _items_accepted(base, args, value)
    if base in MAPPINGS:
        return isinstance(value, dict) and (
            len(args) != 2 or all(accepts(args[1], v) for v in value.values())
        )
    # plain values are not callable (a `_target_` node passed above); other classes: unknown
    return base is not abc.Callable


def _items_accepted(base: Any, args: tuple[Any, ...], value: list[Any]) -> bool:
    if not args:
        return True
    if base is tuple and not (len(args) == 2 and args[1] is Ellipsis):
        return len(args) == len(value) and all(map(accepts, args, value))
    return all(accepts(args[0], item) for item in value)


def describe(annotation: Any) -> str:
    """`int`, `int | None`, `Sequence[float]`: the annotation as a reader writes it."""
    if isinstance(annotation, type) and not get_args(annotation):
        return annotation.__name__
    return str(annotation).replace("typing.", "").replace("collections.abc.", "")


def node_problems(path: str, node: dict[str, Any], target: str, obj: Any) -> list[str]:
    """Unknown keys and clearly mistyped values of the `_target_` node at `path`."""
    signature = signature_of(obj)
    if signature is None:
        return []
    params = {
        name: p
        for name, p in signature.parameters.items()
        if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)
    }
    takes_any = any(p.kind is p.VAR_KEYWORD for p in signature.parameters.values())
    problems = []
    for key, value in node.items():
        full = f"{path}.{key}" if path else key
        if key in HYDRA_KEYS:
            continue
        if key not in params:
            if not takes_any:
                problems.append(_unknown_key(path, full, key, target, list(params)))
            continue
        param = params[key]
        if value is None and param.default is None:
            continue
        if value == "???":  # filled in from the data later
            continue
        if not accepts(param.annotation, value):
            problems.append(
                f"{full}={value!r}: expected {describe(param.annotation)}, got "
                f"{type(value).__name__} ({target} takes {key}: {describe(param.annotation)})."
            )
    return problems


def _unknown_key(path: str, full: str, key: str, target: str, known: list[str]) -> str:
    close = difflib.get_close_matches(key, known, n=1)
    hint = f" (did you mean {path}.{close[0]}?)" if close else ""
    return (
        f"{full}: unknown key{hint}; {target} takes {', '.join(known) or 'no keys'}. "
        "Fix the spelling or remove the key."
    )
