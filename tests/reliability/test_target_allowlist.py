"""What the template's own `allowed_targets` (conf/config.yaml) admits: every target its
configs need passes without a warning, and every torch or torchvision module it lists admits
only harmless members (or refuses them by name, DENIED). The allowlist itself (entries by
module, object or `pkg.*`, refusals before import, re-exports, allowed_targets_extra, widening
warnings, train.py and a sweep never running a refused target) is the engine's suite:
engine/tests/test_target_allowlist.py.
"""

from __future__ import annotations

import importlib
import inspect
import logging
import re
from pathlib import Path

import pytest
from hydra._internal.utils import _locate
from omegaconf import OmegaConf

from engine.config import allowlist
from engine.config.allowlist import after_import, before_import, denied_reason
from engine.config.validate import validate_config

ROOT = Path(__file__).resolve().parents[2]
DEFAULT = list(OmegaConf.load(ROOT / "conf" / "config.yaml").allowed_targets)
# words in the name of a public member that would need a look before a torch or torchvision
# module stays in the default list (a future version may add such a member)
DANGEROUS_WORDS = {
    "run",
    "system",
    "exec",
    "eval",
    "load",
    "save",
    "download",
    "compile",
    "open",
    "import",
    "spawn",
    "popen",
    "remove",
    "rmtree",
    "unlink",
    "write",
    "url",
    "hub",
    "pickle",
    "script",
    "shell",
    "command",
    "fetch",
    "jit",
    "serialize",
}


@pytest.mark.parametrize(
    "override",
    [
        "+job={_target_:torch.nn.CrossEntropyLoss,label_smoothing:0.1}",
        "+job={_target_:torch.optim.lr_scheduler.StepLR,_partial_:true,step_size:3}",
        "model=resnet18",
        "loader.collate_fn={_target_:engine.data.collate.already_batched,_partial_:true}",
    ],
)
def test_what_configs_need_passes(make_cfg, caplog, override: str) -> None:
    with caplog.at_level(logging.WARNING, logger="engine.config.allowlist"):
        validate_config(make_cfg(override))
    assert not caplog.records  # the shipped list: nothing to warn about


def _tokens(name: str) -> set[str]:
    """`get_model_weights` -> {get, model, weights}; `LoadState` -> {load, state}."""
    return {t.lower() for t in re.findall(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|\d+", name)}


TORCH_MODULES = [e for e in DEFAULT if e.startswith(("torch.", "torchvision.")) and "*" not in e]


@pytest.mark.parametrize("entry", TORCH_MODULES)
def test_no_listed_torch_member_looks_dangerous(entry: str) -> None:
    """Every public callable a listed torch/torchvision module admits has a harmless name, or
    is refused by name (DENIED): a new torch version adding `run` or `load_url` fails here."""
    module = importlib.import_module(entry)
    admitted = []
    for name in dir(module):
        obj = getattr(module, name)
        if name.startswith("_") or inspect.ismodule(obj) or not callable(obj):
            continue
        target = f"{entry}.{name}"
        if before_import("k", target, DEFAULT) or after_import("k", target, obj, DEFAULT):
            continue
        admitted.append(name)
        assert not _tokens(name) & DANGEROUS_WORDS, f"{target}: check it, or add it to DENIED"
    assert admitted  # the entry still admits something


def test_denied_members_of_listed_modules_are_refused() -> None:
    for name in allowlist.DENIED:
        if any(name.startswith(entry + ".") for entry in TORCH_MODULES):
            problem = before_import("k", name, DEFAULT) or after_import(
                "k", name, _locate(name), DEFAULT
            )
            assert problem and problem.startswith(f"k={name}: refused, ")
    assert denied_reason("torch.utils.collect_env.run") is not None
