"""`_target_`s are refused unless the allowlist names them: by module, object or `pkg.*`, on
the reference project (its conf/config.yaml lists reference.*, torch.optim and
torchvision.transforms.v2, and an empty allowed_targets_extra).

Every refusal happens before the target is imported or run: the sentinel file never appears.
What the template's own list admits and refuses (each torch module it lists, what its configs
need) is the template's tests/reliability/test_target_allowlist.py.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from hydra.utils import instantiate
from omegaconf import OmegaConf, open_dict

from engine.config import allowlist
from engine.config.allowlist import grants
from engine.config.errors import ConfigError
from engine.config.validate import validate_config
from engine_dev.cli import run_script
from tests.conftest import REFERENCE, TRAIN, reference_args

DEFAULT = list(OmegaConf.load(REFERENCE / "conf" / "config.yaml").allowed_targets)
EVAL = '{_target_:builtins.eval,_args_:[\'open("SENTINEL","w")\']}'
EXEC = (
    "{_target_:torch.fx.graph_module._exec_with_source,_convert_:all,"
    'src:\'open("SENTINEL","w").close()\',globals:{}}'
)
NOT_LISTED = "refused, not in allowed_targets"


@pytest.fixture(autouse=True)
def _reference_is_the_project(monkeypatch) -> None:
    """The lists a widening is measured against are the reference project's (train.py sets
    PROJECT_ROOT to its folder; without it the engine would read the checkout's conf/)."""
    monkeypatch.setenv("PROJECT_ROOT", str(REFERENCE))


@pytest.fixture
def make_cfg(reference_cfg):
    """The reference project's config with `overrides` (its run dir tmp_path/run)."""
    return lambda *overrides: reference_cfg("run", *overrides)


def allow(*extra: str) -> str:
    """The override that adds `extra` entries to the shipped list (the documented way)."""
    return f"allowed_targets_extra=[{','.join(extra)}]"


def _refusal(make_cfg, *overrides: str) -> str:
    with pytest.raises(ConfigError) as caught:
        validate_config(make_cfg(*overrides))
    return str(caught.value)


@pytest.mark.parametrize(
    ("target", "entries", "admitted"),
    [
        ("torch.optim.Adam", ["torch.optim"], True),  # a member of a listed module
        ("torch.optim.lr_scheduler.StepLR", ["torch.optim"], False),  # a submodule's: no
        ("torch.optim.lr_scheduler.StepLR", ["torch.optim", "torch.optim.lr_scheduler"], True),
        ("torch.optim.Adam.step", ["torch.optim"], False),  # an attribute of a member: no
        ("torchx.components.run", ["torch.*"], False),  # subtrees match on module boundaries
        ("referenceevil.payload", ["reference.*"], False),
        ("reference.parts.TinyNet", ["reference.*"], True),
        (
            "engine.modes.benchmark.BenchmarkSettings",
            ["engine.modes.benchmark.BenchmarkSettings"],
            True,
        ),
        ("engine.modes.benchmark.benchmark", ["engine.modes.benchmark.BenchmarkSettings"], False),
        (
            "engine.modes.benchmark.BenchmarkSettings.x",
            ["engine.modes.benchmark.BenchmarkSettings"],
            False,
        ),  # an object entry is not a module: nothing under it
        ("os.system", DEFAULT, False),
        ("builtins.eval", DEFAULT, False),
        ("torch.utils.collect_env.run", DEFAULT, False),
    ],
)
def test_entries_admit_by_module_object_or_subtree(target, entries, admitted) -> None:
    assert bool(grants(target, entries)) is admitted


@pytest.mark.parametrize(
    ("override", "key", "target", "reason"),
    [
        (
            "transforms.train=[{_target_:torch.utils.collect_env.run,command:'touch SENTINEL'}]",
            "transforms.train[0]._target_",
            "torch.utils.collect_env.run",
            NOT_LISTED,
        ),
        (
            f"loader.collate_fn={EXEC}",
            "loader.collate_fn._target_",
            "torch.fx.graph_module._exec_with_source",
            "refused, _exec_with_source is a private name",
        ),
        (
            "+job={_target_:engine.core.io.write_json,path:SENTINEL,obj:1}",
            "job._target_",
            "engine.core.io.write_json",
            NOT_LISTED,
        ),
        (
            "+job={_target_:tools.new_project.copy_template,root:.,dest:SENTINEL}",
            "job._target_",
            "tools.new_project.copy_template",
            NOT_LISTED,
        ),
        (
            "+job={_target_:engine_dev.demo.make_demo_data,out:SENTINEL}",
            "job._target_",
            "engine_dev.demo.make_demo_data",
            NOT_LISTED,
        ),
        (
            "+job={_target_:engine.data.cache_store.CacheWriter,folder:.,paths:[],settings:{},"
            "classes:[],rebuild:true}",
            "job._target_",
            "engine.data.cache_store.CacheWriter",
            NOT_LISTED,
        ),
        (
            "+job={_target_:engine.modes.cache.cache}",
            "job._target_",
            "engine.modes.cache.cache",
            NOT_LISTED,
        ),
        (
            "loader.collate_fn={_target_:os.system,command:'touch SENTINEL'}",
            "loader.collate_fn._target_",
            "os.system",
            NOT_LISTED,
        ),
        (f"loader.collate_fn={EVAL}", "loader.collate_fn._target_", "builtins.eval", NOT_LISTED),
        ("dataset._target_=builtins.eval", "dataset._target_", "builtins.eval", NOT_LISTED),
        (
            "+job={_target_:subprocess.run,args:[touch,SENTINEL]}",
            "job._target_",
            "subprocess.run",
            NOT_LISTED,
        ),
        (
            "+job={_target_:importlib.import_module,name:antigravity}",
            "job._target_",
            "importlib.import_module",
            NOT_LISTED,
        ),
        (
            "+job={_target_:engine.data.decode.os.system,command:'touch SENTINEL'}",
            "job._target_",
            "engine.data.decode.os.system",
            NOT_LISTED,
        ),
        ("+job={_target_:torch.load,f:SENTINEL}", "job._target_", "torch.load", NOT_LISTED),
        (
            "+job={_target_:torch.hub.load,repo_or_dir:SENTINEL,model:x}",
            "job._target_",
            "torch.hub.load",
            NOT_LISTED,
        ),
    ],
)
def test_unsafe_target_is_refused(make_cfg, monkeypatch, tmp_path, override, key, target, reason):
    monkeypatch.chdir(tmp_path)
    text = _refusal(make_cfg, override)
    assert text.startswith(f"{key}={target}: {reason}"), text
    assert len(text.splitlines()) == 1
    if reason == NOT_LISTED:
        assert (
            "add its module" in text
            and "conf/config.yaml or per run: 'allowed_targets_extra=[" in text
        )
    assert not (tmp_path / "SENTINEL").exists()


@pytest.mark.parametrize(
    ("target", "real", "entry"),
    [
        ("reference.parts.torch.load", "torch.serialization.load", "reference.*"),
        ("engine.data.datasets.imagefolder.os.system", "posix.system", "engine.data.datasets.*"),
        (
            "engine.data.collate.pad_sequence",
            "torch.nn.utils.rnn.pad_sequence",
            "engine.data.collate",
        ),
        (
            "torch.optim.lr_scheduler.Optimizer",
            "torch.optim.optimizer.Optimizer",
            "torch.optim.lr_scheduler",
        ),
    ],
)
def test_reexports_are_refused_by_what_they_resolve_to(make_cfg, tmp_path, target, real, entry):
    sentinel = tmp_path / "SENTINEL"
    node = f"loader.collate_fn={{_target_:{target},_args_:['{sentinel}']}}"
    # the entry that admits the name by its module: listed by the project, else added per run
    listed = entry in DEFAULT or entry.startswith("engine.")
    text = _refusal(make_cfg, node, *([] if listed else [allow(entry)]))
    assert text.startswith(
        f"loader.collate_fn._target_={target}: refused, it is {real} from outside "
        f"allowed_targets ({entry}: "
    ), text
    assert "name it by its own module" in text
    assert not sentinel.exists()


@pytest.mark.parametrize(
    ("target", "extra", "reason"),
    [
        ("torch.optim", [], "it is a module, not a class or function"),
        ("torch.nn", ["torch.*"], "it is a module, not a class or function"),
        ("engine.data.datasets.csv.SPLITS", [], "it is a tuple value, not a class or function"),
        (
            "torchvision.models.get_model",
            ["torchvision.models"],
            "it builds any torchvision model by name",
        ),
        (
            "torchvision.models.get_model_builder",
            ["torchvision.models"],
            "it returns any torchvision model builder",
        ),
    ],
)
def test_modules_plain_values_and_refused_members(make_cfg, target, extra, reason) -> None:
    """Refused even where an entry admits the name (the reference project lists neither
    torch.nn nor torchvision.models: the cases that need them add them per run)."""
    overrides = [f"+job={{_target_:{target}}}", *([allow(*extra)] if extra else [])]
    text = _refusal(make_cfg, *overrides)
    assert text.startswith(f"job._target_={target}: refused, {reason}"), text


def test_the_allowlist_alone_keeps_code_runners_out(make_cfg, monkeypatch) -> None:
    """Without the DENIED second line, the list still refuses torch.load and friends; with a
    list widened to all of torch, DENIED still does."""
    targets = ["torch.load", "torch.hub.load", "torch.utils.collect_env.run", "torch.jit.load"]
    nodes = [f"+t{i}={{_target_:{target}}}" for i, target in enumerate(targets)]
    lines = _refusal(make_cfg, allow("torch.*"), *nodes).splitlines()
    assert len(lines) == len(targets)
    assert all(": refused, it can run arbitrary code" in line for line in lines), lines
    monkeypatch.setattr(allowlist, "DENIED", {})
    for target in targets:
        assert f"{target}: {NOT_LISTED}" in _refusal(make_cfg, f"+job={{_target_:{target}}}")


def test_target_in_a_list_is_refused(make_cfg) -> None:
    cfg = make_cfg()
    with open_dict(cfg):
        cfg.transforms.train[1] = {"_target_": "os.system", "command": "true"}
    with pytest.raises(ConfigError, match=r"^transforms\.train\[1\]\._target_=os\.system: refused"):
        validate_config(cfg)


@pytest.fixture
def myproject(tmp_path: Path, monkeypatch) -> Iterator[Path]:
    """A user package `myproject` on sys.path: models.Net (and a re-exported os)."""
    package = tmp_path / "myproject"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "models.py").write_text(
        "import math\nimport os\n\n\n"
        "class Net:\n    def __init__(self, width: int = 4, limit: float = math.inf):\n"
        "        self.width = width\n\n\n"
        "class Other(Net):\n    pass\n\n\n"
        "def _hidden():\n    return None\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    yield package
    for name in [m for m in sys.modules if m == "myproject" or m.startswith("myproject.")]:
        sys.modules.pop(name)


def test_a_user_package_as_a_subtree(make_cfg, myproject, caplog) -> None:
    net = "+job={_target_:myproject.models.Net,width:8}"
    assert _refusal(make_cfg, net).startswith(f"job._target_=myproject.models.Net: {NOT_LISTED}")
    with caplog.at_level(logging.WARNING, logger="engine.config.allowlist"):
        validate_config(make_cfg(net, allow("myproject.*")))
        validate_config(make_cfg(net, "+job.limit=inf", allow("myproject.*")))  # default: inf
    assert [r.getMessage() for r in caplog.records] == [
        "allowed_targets adds myproject.* to what conf/config.yaml lists (by an experiment file "
        "or override): configs may instantiate what these admit."
    ] * 2  # one line per validation
    reexport = _refusal(
        make_cfg, "+job={_target_:myproject.models.os.system}", allow("myproject.*")
    )
    assert reexport.startswith("job._target_=myproject.models.os.system: refused, it is posix.")
    private = _refusal(make_cfg, "+job={_target_:myproject.models._hidden}", allow("myproject.*"))
    assert "refused, _hidden is a private name" in private


def test_an_entry_in_allowed_targets_extra_is_instantiated(make_cfg, myproject) -> None:
    net = "+job={_target_:myproject.models.Net,width:8}"
    assert _refusal(make_cfg, net).startswith(f"job._target_=myproject.models.Net: {NOT_LISTED}")
    cfg = make_cfg(net, "allowed_targets_extra=[myproject.models.Net]")
    validate_config(cfg)
    assert instantiate(cfg.job).width == 8
    assert list(cfg.allowed_targets) == DEFAULT  # appended to, not replaced


def test_a_user_object_as_an_exact_entry(make_cfg, myproject) -> None:
    validate_config(make_cfg("+job={_target_:myproject.models.Net}", allow("myproject.models.Net")))
    other = _refusal(
        make_cfg, "+job={_target_:myproject.models.Other}", allow("myproject.models.Net")
    )
    assert other.startswith(f"job._target_=myproject.models.Other: {NOT_LISTED}")


def test_widening_in_an_experiment_file_warns(make_cfg, tmp_path, caplog) -> None:
    (tmp_path / "experiment").mkdir()
    (tmp_path / "experiment" / "wide.yaml").write_text(
        f"# @package _global_\nallowed_targets: [{', '.join([*DEFAULT, 'torch.*'])}]\n"
    )
    with caplog.at_level(logging.WARNING, logger="engine.config.allowlist"):
        validate_config(
            make_cfg(f"hydra.searchpath=[pkg://engine.conf,file://{tmp_path}]", "+experiment=wide")
        )
        with pytest.raises(
            ConfigError, match=r"optimizer\._target_=torch.optim.SGD: refused, not in"
        ):
            validate_config(make_cfg("allowed_targets=[reference.*]"))  # narrower: no warning
    assert len(caplog.records) == 1 and "adds torch.* to what" in caplog.text


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
    with pytest.raises(ConfigError, match=r"probe_pkg\.make_collate: refused, not in"):
        validate_config(make_cfg(target))
    assert not marker.exists() and "probe_pkg" not in sys.modules
    try:  # the user's extension: the same target now passes (and so gets imported)
        validate_config(make_cfg(target, allow("probe_pkg")))
        assert marker.exists()
    finally:
        sys.modules.pop("probe_pkg", None)


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ("allowed_targets=reference", "allowed_targets='reference': expected a list of entries"),
        (
            "allowed_targets=[reference.,torch.]",
            "allowed_targets[0]='reference.': a prefix is no longer an entry",
        ),
        (
            "allowed_targets=['torch optim']",
            "allowed_targets[0]='torch optim': expected a module path (torch.optim), an object",
        ),
        ("allowed_targets=['*']", "allowed_targets[0]='*': expected a module path"),
    ],
)
def test_allowlist_entries_are_checked(make_cfg, override: str, message: str) -> None:
    assert _refusal(make_cfg, override).startswith(message)


@pytest.mark.parametrize(
    ("override", "message"),
    [
        (
            "allowed_targets_extra=[myproject.*,'timm create_model']",
            "allowed_targets_extra[1]='timm create_model': expected a module path (torch.optim)",
        ),
        ("allowed_targets_extra=timm", "allowed_targets_extra='timm': expected a list of"),
    ],
)
def test_a_bad_allowed_targets_extra_entry_gets_one_line(make_cfg, override, message) -> None:
    text = _refusal(make_cfg, override)
    assert text.startswith(message) and len(text.splitlines()) == 1


@pytest.mark.parametrize(
    "override",
    [
        "transforms.train=[{_target_:torch.utils.collect_env.run,command:'touch SENTINEL'}]",
        f"loader.collate_fn={EXEC}",
        "loader.collate_fn={_target_:os.system,command:'touch SENTINEL'}",
    ],
)
def test_train_py_never_runs_the_command(demo_dir: Path, tmp_path: Path, override: str) -> None:
    result = run_script(
        TRAIN,
        *reference_args(demo_dir, tmp_path / "runs", "trainer.max_epochs=1", override),
        f"hydra.run.dir={tmp_path / 'run'}",
        cwd=tmp_path,
    )
    assert result.returncode == 1
    assert "._target_=" in result.stderr and ": refused, " in result.stderr
    assert "Traceback" not in result.stderr
    assert not (tmp_path / "SENTINEL").exists() and not (REFERENCE / "SENTINEL").exists()


def test_a_refused_sweep_job_is_never_built(demo_dir: Path, tmp_path: Path) -> None:
    """The sweep summary records a refused job (Hydra's on_job_end) without instantiating its
    config: neither a listed-nowhere nested target nor Hydra's own blocklist gap runs."""
    mark = tmp_path / "MARK"
    copy = f"{{_target_:shutil.copyfile,_args_:['{TRAIN}','{mark}']}}"
    result = run_script(
        TRAIN,
        "-m",
        *reference_args(demo_dir, tmp_path / "runs", "mode=benchmark"),
        "benchmark.batches=2",
        "benchmark.warmup=1",
        f"hydra.sweep.dir={tmp_path / 'sweep'}",
        f"loader.collate_fn={copy}",
        cwd=tmp_path,
    )
    assert result.returncode == 1
    assert "loader.collate_fn._target_=shutil.copyfile: refused" in result.stderr
    assert not mark.exists()
    summary = (tmp_path / "sweep" / "summary.csv").read_text()
    assert "failed" in summary and "shutil.copyfile" in summary
