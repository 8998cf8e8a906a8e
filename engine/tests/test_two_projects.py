"""load_model of two projects' checkpoints in one process (a notebook comparing them): both
name `src.models.net.Net`, and each model is built with its own project's code and keeps it
when the other project's is loaded again (engine/inference/project.py `project_code`)."""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch

from engine.data.transforms import Pipelines
from engine.inference import load_model
from engine.runs.checkpoint_files import CheckpointError, save_checkpoint

# src/models/net.py of a project: the two differ only in the factor applied to the logits
NET = """
import torch
from torch import nn

FACTOR = {factor}


class Net(nn.Module):
    def __init__(self, num_classes: int) -> None:
        super().__init__()
        self.lin = nn.Linear(4, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.lin(x) * FACTOR
"""
CONFIG = "allowed_targets: [src.models.*]\n"  # conf/config.yaml: all load_model reads of it
SAVED = {
    "model": {"_target_": "src.models.net.Net", "num_classes": 3},
    "transforms": {"_target_": "engine.data.transforms.Pipelines", "train": [], "val": []},
    "data": {"classes": ["a", "b", "c"]},
}
X = torch.randn(2, 4, generator=torch.Generator().manual_seed(0))


def _project(root: Path, factor: int, seed: int) -> torch.Tensor:
    """A project at `root` (conf/config.yaml, src/models/net.py) and root/net.pt, a checkpoint
    of its own Net (imported from its file under a name of its own); that model's outputs on X."""
    (root / "conf").mkdir(parents=True)
    (root / "engine").mkdir()  # a plain folder named as the engine, as the template's checkout has
    (root / "conf" / "config.yaml").write_text(CONFIG)
    (root / "src" / "models").mkdir(parents=True)
    (root / "src" / "__init__.py").write_text("")
    (root / "src" / "models" / "__init__.py").write_text("")
    (root / "src" / "models" / "net.py").write_text(NET.format(factor=factor))
    spec = importlib.util.spec_from_file_location(f"net_{root.name}", root / "src/models/net.py")
    assert spec is not None and spec.loader is not None
    own = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(own)
    torch.manual_seed(seed)
    model = own.Net(3)
    save_checkpoint(root / "net.pt", {"model": model.state_dict(), "config": SAVED})
    with torch.no_grad():
        return model(X)


@pytest.fixture
def own_src(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """sys.path and the `src` modules as they were, once the test is done."""
    monkeypatch.setattr(sys, "path", list(sys.path))
    before = {k: v for k, v in sys.modules.items() if k.split(".")[0] == "src"}
    yield
    for name in [k for k in sys.modules if k.split(".")[0] == "src"]:
        del sys.modules[name]
    sys.modules.update(before)


def test_each_projects_model_is_built_with_its_own_code(tmp_path: Path, own_src: None) -> None:
    first, second = tmp_path / "first", tmp_path / "second"
    expected = {first: _project(first, 2, 0), second: _project(second, 3, 1)}
    sys.path[:0] = [str(first), str(second)]  # the first project's src/ is found first
    models = {}
    for root in (second, first, second, first):
        model = load_model(root / "net.pt", project_root=root)
        with torch.no_grad():
            assert torch.allclose(model(X), expected[root]), root.name
        assert type(model.preprocess.pipelines) is Pipelines  # the engine imported once
        models.setdefault(root, model)
        assert type(model) is type(models[root])  # loaded again: the same class, not a copy
    for root, model in models.items():  # each still runs its own code
        with torch.no_grad():
            assert torch.allclose(model(X), expected[root]), root.name
    assert type(models[first]) is not type(models[second])
    assert Path(sys.modules["src.models.net"].__file__).is_relative_to(second)  # the first loaded


def test_a_namespace_src_that_another_projects_src_would_replace_is_refused(
    tmp_path: Path, own_src: None
) -> None:
    """A project whose src/ has no __init__.py loses to a regular src of another project,
    imported already or anywhere on sys.path: refused in one line, never built with that
    project's code (the attack's D1)."""
    first, second = tmp_path / "first", tmp_path / "second"
    _project(first, 2, 0)
    expected = _project(second, 3, 1)
    for init in (second / "src" / "__init__.py", second / "src" / "models" / "__init__.py"):
        init.unlink()
    sys.path[:0] = [str(first)]  # the first project's regular src, not imported yet
    for _ in range(2):  # then imported by its own load
        with pytest.raises(CheckpointError) as refused:
            load_model(second / "net.pt", project_root=second)
        assert str(refused.value) == (
            f"project_root={second}: its src/ has no __init__.py (a namespace package), and the "
            f"src package of {first} is imported in its place, whose code would build this "
            f"checkpoint's model; add {second / 'src' / '__init__.py'} (and one in each of its "
            "folders, as the template's src/ has)."
        )
        load_model(first / "net.pt", project_root=first)
    for name in [k for k in sys.modules if k.split(".")[0] == "src"]:
        del sys.modules[name]
    sys.path.remove(str(first))  # alone, the namespace project builds with its own code
    with torch.no_grad():
        assert torch.allclose(load_model(second / "net.pt", project_root=second)(X), expected)


def test_two_namespace_projects_are_kept_apart_by_refusing_the_second(
    tmp_path: Path, own_src: None
) -> None:
    """Both projects' src/ without __init__.py: the first's namespace package is imported,
    and its __path__ follows sys.path; the second is refused, not built with the first's
    Net (the second attack's D1)."""
    first, second = tmp_path / "first", tmp_path / "second"
    expected = _project(first, 2, 0)
    _project(second, 3, 1)
    for root in (first, second):
        for init in (root / "src" / "__init__.py", root / "src" / "models" / "__init__.py"):
            init.unlink()
    with torch.no_grad():
        assert torch.allclose(load_model(first / "net.pt", project_root=first)(X), expected)
    with pytest.raises(CheckpointError, match=rf"the src package of {first} is imported"):
        load_model(second / "net.pt", project_root=second)
