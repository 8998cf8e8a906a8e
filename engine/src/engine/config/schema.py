"""A `_target_` node's keys and values against the target's signature (names and type hints)."""

from __future__ import annotations

import collections.abc as abc
import inspect
import math
import re
import types
from typing import Annotated, Any, Literal, Union, get_args, get_origin

import torch

from engine.core.bounds import INT32, Bound
from engine.core.text import closest

_ANNOTATED = re.compile(r"Annotated\[([^,\[\]]+), [^\[\]]*\]")
HYDRA_KEYS = {"_target_", "_partial_", "_recursive_", "_convert_", "_args_"}
SEQUENCES = (list, tuple, abc.Sequence, abc.MutableSequence)
MAPPINGS = (dict, abc.Mapping, abc.MutableMapping)
# Bounds of parameters of torch's own classes (which carry no Annotated hints), by the
# module their target lives in: torch.optim checks these only once a run is under way.
TORCH_BOUNDS = {
    "torch.optim": {
        "lr": Bound(0),
        "weight_decay": Bound(0),
        "momentum": Bound(0),
        "eps": Bound(0),
        "dampening": Bound(0),
    },
    "torchvision.transforms.v2": {  # checked at the first batch otherwise, in torch's words
        "size": Bound(1, INT32),
        "p": Bound(0, 1),
        "ratio": Bound(0, open_least=True),
        "padding": Bound(0, INT32),
        "degrees": Bound(-360, 360),
    },
}


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
    numbers and lists pass for a tensor (not a word or a bool: `lr=fast` is refused here, not
    deep inside torch); a nested `_target_` node passes for anything (its own node is checked).
    """
    if annotation is inspect.Parameter.empty or annotation is Any or isinstance(annotation, str):
        return True
    if isinstance(value, dict) and "_target_" in value:
        return True
    if annotation is None or annotation is type(None):
        return value is None
    origin, args = get_origin(annotation), get_args(annotation)
    if origin is Annotated:
        return accepts(args[0], value)
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
    if _is_tensor(annotation):
        return isinstance(value, (int, float, list)) and not isinstance(value, bool)
    base = origin or annotation
    if base in SEQUENCES:
        return isinstance(value, list) and _items_accepted(base, args, value)
    if base in MAPPINGS:
        return isinstance(value, dict) and (
            len(args) != 2 or all(accepts(args[1], v) for v in value.values())
        )
    # plain values are not callable (a `_target_` node passed above); other classes: unknown
    return base is not abc.Callable


def _is_tensor(annotation: Any) -> bool:
    return isinstance(annotation, type) and issubclass(annotation, torch.Tensor)


def bound_of(annotation: Any) -> Bound | None:
    """The Bound an `Annotated[..., Bound(...)]` hint carries (also inside a Union, list or
    tuple), or None."""
    if get_origin(annotation) is Annotated:
        return next((m for m in annotation.__metadata__ if isinstance(m, Bound)), None)
    return next(filter(None, map(bound_of, get_args(annotation))), None)


def _out_of(bound: Bound, value: Any) -> bool:
    """Whether `value` (a number, or a list of them) breaks `bound`."""
    if isinstance(value, list):
        return any(_out_of(bound, item) for item in value)
    number = isinstance(value, int | float) and not isinstance(value, bool)
    return number and not bound.admits(value)


def is_numeric(annotation: Any, default: Any = inspect.Parameter.empty) -> bool:
    """Whether a parameter takes numbers: int, float or Tensor (also inside a Union, list or
    tuple); unannotated, whether its default is a number."""
    if get_origin(annotation) is Annotated:
        return is_numeric(get_args(annotation)[0])
    if annotation is inspect.Parameter.empty:
        return isinstance(default, (int, float)) and not isinstance(default, bool)
    if annotation in (int, float) or _is_tensor(annotation):
        return True
    return any(is_numeric(arg) for arg in get_args(annotation) if arg is not Ellipsis)


def is_nonfinite(value: Any) -> bool:
    """Whether `value` is (or a list/tuple holds) inf, -inf or nan."""
    if isinstance(value, (list, tuple)):
        return any(is_nonfinite(item) for item in value)
    return isinstance(value, float) and not math.isfinite(value)


def _kind(annotation: Any, numeric: bool, expected: str) -> str:
    """What to set, in words: `an int`, `a number`, `true or false`, `a str | None`."""
    if annotation is int:
        return "an int"
    if annotation is bool:
        return "true or false"
    if numeric:
        return "a number"
    if any(abc.Callable in (a, get_origin(a)) for a in (annotation, *get_args(annotation))):
        return "a _target_ node naming a function"
    return f"a {expected}"


def _example(full: str, default: Any) -> str:
    """`, e.g. optimizer.lr=0.001` from a plain default ("" when there is none)."""
    if isinstance(default, bool):
        return f", e.g. {full}={str(default).lower()}"
    if isinstance(default, (int, float, str)) and default != "" and not is_nonfinite(default):
        return f", e.g. {full}={default}"
    return ""


def _items_accepted(base: Any, args: tuple[Any, ...], value: list[Any]) -> bool:
    if not args:
        return True
    if base is tuple and not (len(args) == 2 and args[1] is Ellipsis):
        return len(args) == len(value) and all(map(accepts, args, value))
    return all(accepts(args[0], item) for item in value)


def describe(annotation: Any) -> str:
    """`int`, `int | None`, `Sequence[float]`: the annotation as a reader writes it."""
    if get_origin(annotation) is Annotated:
        return describe(get_args(annotation)[0])
    union = get_origin(annotation) in (Union, types.UnionType)
    if union and any(get_origin(arg) is Annotated for arg in get_args(annotation)):
        return " | ".join(describe(arg) for arg in get_args(annotation))
    if annotation is type(None):
        return "None"
    if isinstance(annotation, type) and not get_args(annotation):
        return annotation.__name__
    text = str(annotation).replace("typing.", "").replace("collections.abc.", "")
    return _ANNOTATED.sub(r"\1", text)  # Sequence[Annotated[int, Bound(...)]] -> Sequence[int]


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
        expected = describe(param.annotation)
        numeric = is_numeric(param.annotation, param.default)
        if not accepts(param.annotation, value):
            problems.append(
                f"{full}={value!r}: expected {expected}, got {type(value).__name__}; set "
                f"{_kind(param.annotation, numeric, expected)}{_example(full, param.default)} "
                f"({target} takes {key}: {expected})."
            )
        elif numeric and is_nonfinite(value) and not is_nonfinite(param.default):
            problems.append(
                f"{full}={value!r}: expected a finite number (inf and nan fail only once the run "
                f"is under way); set a finite value{_example(full, param.default)} ({target} "
                f"takes {key}: {expected})."
            )
        elif (bound := _bound(param.annotation, target, key)) and _out_of(bound, value):
            each = "every item " if isinstance(value, list) else ""
            problems.append(
                f"{full}={value!r}: expected {each}{bound.words()}"
                f"{_example(full, param.default)} ({target} takes {key}: {expected})."
            )
    return problems


def _bound(annotation: Any, target: str, key: str) -> Bound | None:
    """The bound of parameter `key` of `target`: its hint's, or torch's (TORCH_BOUNDS)."""
    found = bound_of(annotation)
    if found is not None:
        return found
    module = next((m for m in TORCH_BOUNDS if target.startswith(f"{m}.")), None)
    return TORCH_BOUNDS[module].get(key) if module else None


def _unknown_key(path: str, full: str, key: str, target: str, known: list[str]) -> str:
    close = closest(key, known)
    hint = f" (did you mean {path}.{close}?)" if close else ""
    return (
        f"{full}: unknown key{hint}; {target} takes {', '.join(known) or 'no keys'}. "
        "Fix the spelling or remove the key."
    )
