"""`_target_`s outside `allowed_targets` are refused before anything is imported or run."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from omegaconf import open_dict

from src.config.allowlist import is_allowed
from src.config.errors import ConfigError
from src.config.validate import validate_config

ROOT = Path(__file__).resolve().parents[2]
SHIPPED = ["src.", "torch.", "torchvision."]
EVAL = '{_target_:builtins.eval,_args_:[\'open("SENTINEL","w")\']}'


@pytest.mark.parametrize(
    ("target", "prefixes", "allowed"),
    [
        ("torch.optim.Adam", SHIPPED, True),
        ("torchvision.models.resnet18", SHIPPED, True),
        ("torchx.components.run", SHIPPED, False),  # not torch.
        ("srcevil.payload", ["src"], False),  # not src
        ("src", ["src."], True),
        ("os.system", SHIPPED, False),
        ("builtins.eval", SHIPPED, False),
        ("myproject.models.Net", [*SHIPPED, "myproject."], True),
        ("myproject_extra.Net", [*SHIPPED, "myproject."], False),
    ],
)
def test_prefixes_match_on_module_boundaries(target: str, prefixes: list[str], allowed: bool):
    assert is_allowed(target, prefixes) is allowed


@pytest.mark.parametrize(
    ("override", "key", "target"),
    [
        ("loader.collate_fn={_target_:os.system,command:'touch SENTINEL'}",
         "loader.collate_fn._target_", "os.system"),
        (f"loader.collate_fn={EVAL}", "loader.collate_fn._target_", "builtins.eval"),
        ("dataset._target_=builtins.eval", "dataset._target_", "builtins.eval"),
    ],
)  # fmt: skip
def test_unsafe_target_is_refused(make_cfg, monkeypatch, tmp_path, override, key, target):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ConfigError) as caught:
        validate_config(make_cfg(override))
    assert str(caught.value).startswith(f"{key}={target}: refused, not under allowed_targets=")
    assert "add its package to allowed_targets in conf/config.yaml" in str(caught.value)
    assert not (tmp_path / "SENTINEL").exists()


@pytest.mark.parametrize(
    ("target", "reason"),
    [
        ("src.training.checkpoint.os.makedirs", "it is os.makedirs from outside allowed_targets"),
        ("torch.load", "it can run arbitrary code"),
        ("torch.hub.load", "it can run arbitrary code"),
        ("torch.serialization.load", "it can run arbitrary code"),
    ],
)
def test_reexports_and_code_running_entry_points_are_refused(make_cfg, tmp_path, target, reason):
    sentinel = tmp_path / "SENTINEL"
    cfg = make_cfg(f"loader.collate_fn={{_target_:{target},_args_:['{sentinel}']}}")
    with pytest.raises(ConfigError) as caught:
        validate_config(cfg)
    assert str(caught.value).startswith(f"loader.collate_fn._target_={target}: refused, {reason}")
    assert not sentinel.exists()


def test_target_in_a_list_is_refused(make_cfg) -> None:
    cfg = make_cfg()
    with open_dict(cfg):
        cfg.transforms.train[1] = {"_target_": "os.system", "command": "true"}
    with pytest.raises(ConfigError, match=r"^transforms\.train\[1\]\._target_=os\.system: refused"):
        validate_config(cfg)


def _probe_module(folder: Path) -> Path:
    """A package `probe_pkg` whose import writes `imported` (so an import shows)."""
    (folder / "probe_pkg").mkdir()
    marker = folder / "imported"
    (folder / "probe_pkg" / "__init__.py").write_text(
        f"open({str(marker)!r}, 'w').close()\n\ndef make_collate():\n    return list\n"
    )
    return marker


def test_refused_before_import_and_allowed_once_listed(make_cfg, monkeypatch, tmp_path) -> None:
    marker = _probe_module(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    target = "loader.collate_fn={_target_:probe_pkg.make_collate}"
    with pytest.raises(ConfigError, match=r"probe_pkg\.make_collate: refused"):
        validate_config(make_cfg(target))
    assert not marker.exists() and "probe_pkg" not in sys.modules
    try:  # the user's extension: the same target now passes (and so gets imported)
        validate_config(make_cfg(target, "allowed_targets=[src.,torch.,torchvision.,probe_pkg.]"))
        assert marker.exists()
    finally:
        sys.modules.pop("probe_pkg", None)


def test_allowlist_must_be_a_list_of_prefixes(make_cfg) -> None:
    with pytest.raises(ConfigError, match=r"^allowed_targets='src': expected a list of module"):
        validate_config(make_cfg("allowed_targets=src"))


def test_train_py_never_runs_the_command(demo_dir: Path, tmp_path: Path) -> None:
    command = [sys.executable, str(ROOT / "train.py"), f"paths.demo_dir={demo_dir}",
               f"hydra.run.dir={tmp_path / 'run'}", "trainer.max_epochs=1",
               "loader.collate_fn={_target_:os.system,command:'touch SENTINEL'}"]  # fmt: skip
    result = subprocess.run(command, cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert result.returncode == 1
    assert "loader.collate_fn._target_=os.system: refused" in result.stderr
    assert "Traceback" not in result.stderr
    assert not (tmp_path / "SENTINEL").exists() and not (ROOT / "SENTINEL").exists()
