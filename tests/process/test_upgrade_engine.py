"""`make upgrade-engine`: a project made by `make new-project` moves to the engine's next
release with one command, its src/ and conf/ untouched; the release's new config key reaches
its runs with the default, and a checkpoint the older engine wrote still evaluates."""

from __future__ import annotations

import hashlib
import re
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from tools.new_project import engine_version

ROOT = Path(__file__).resolve().parents[2]
# The next release adds a key with a default to a group of the engine (eval/default.yaml) and
# the field that reads it (EvalSettings): what an upgrade brings a project without its edits.
NEW_KEY = "upgrade_probe"
SETTINGS = "src/engine/modes/evaluation.py"
FIELD = "    threshold: float | None = None\n"


def next_minor(version: str) -> str:
    major, minor, _ = version.split(".")
    return f"{major}.{int(minor) + 1}.0"


def next_release(into: Path) -> Path:
    """The engine's source at the next minor version, with NEW_KEY; its wheel, built in `into`."""
    source = Path(
        shutil.copytree(
            ROOT / "engine",
            into / "engine",
            ignore=shutil.ignore_patterns("__pycache__", "build", "*.egg-info", "tests"),
        )
    )
    init = source / "src" / "engine" / "__init__.py"
    version = next_minor(engine_version(ROOT))
    init.write_text(
        re.sub(r'__version__ = "[^"]+"', f'__version__ = "{version}"', init.read_text())
    )
    settings = source / SETTINGS
    assert FIELD in settings.read_text()
    settings.write_text(settings.read_text().replace(FIELD, f'{FIELD}    {NEW_KEY}: str = ""\n'))
    with (source / "src" / "engine" / "conf" / "eval" / "default.yaml").open("a") as yaml:
        yaml.write(f"{NEW_KEY}: new  # a key release {version} adds\n")
    command = [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation"]
    subprocess.run([*command, str(source), "-w", str(into)], check=True, capture_output=True)
    (wheel,) = into.glob(f"hydra_torch_data_engine-{version}-*.whl")
    return wheel


def fingerprint(folder: Path) -> str:
    """One hash of every file's path and bytes under `folder`."""
    digest = hashlib.sha256()
    for path in sorted(
        p for p in folder.rglob("*") if p.is_file() and "__pycache__" not in p.parts
    ):
        digest.update(path.relative_to(folder).as_posix().encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()


def project_venv(dest: Path, deps: Path) -> None:
    """dest/.venv: its own site-packages (where the project and its engine wheel install),
    which sees this checkout's installed dependencies (torch, ...) instead of downloading them:
    through `deps`, links to all of them but the template and its editable engine."""
    deps.mkdir()
    ours = ("hydra_torch_data_", "__editable__")
    for entry in Path(sysconfig.get_paths()["purelib"]).iterdir():
        if not entry.name.startswith(ours) and entry.suffix != ".pth":
            (deps / entry.name).symlink_to(entry)
    subprocess.run([sys.executable, "-m", "venv", str(dest / ".venv")], check=True)
    (own,) = (dest / ".venv" / "lib").glob("python*/site-packages")
    (own / "template_deps.pth").write_text(f"{deps}\n")


@pytest.mark.slow
@pytest.mark.timeout(1800)
def test_a_project_upgrades_its_engine_and_an_old_checkpoint_evaluates(
    demo_dir: Path, tmp_path: Path
) -> None:
    wheel = next_release(tmp_path / "release")
    dest = tmp_path / "proj"
    subprocess.run(
        ["make", "-s", "-o", ".venv/.installed", "new-project", f"DEST={dest}"],
        cwd=ROOT,
        check=True,
    )
    project_venv(dest, tmp_path / "deps")
    python = str(dest / ".venv" / "bin" / "python")
    small = [f"paths.demo_dir={demo_dir}", "trainer.max_epochs=1", "loader.num_workers=0"]
    small += ["loader.batch_size=16", "model.widths=[8,16,32]"]

    def run(*args: str) -> subprocess.CompletedProcess:
        done = subprocess.run(args, cwd=dest, capture_output=True, text=True)
        assert done.returncode == 0, f"{args}\n{done.stdout[-2000:]}{done.stderr[-3000:]}"
        return done

    run("make", "-s", "setup")
    old = run(python, "-c", "import engine; print(engine.__version__)").stdout.strip()
    assert old == engine_version(ROOT)
    run(python, "train.py", *small, "hydra.run.dir=old_run")
    owned = {name: fingerprint(dest / name) for name in ("src", "conf", "tests")}

    upgraded = run("make", "-s", "upgrade-engine", f"WHEEL={wheel}")
    print(upgraded.stdout)  # the closing note quotes it (pytest -s)
    new = next_minor(old)
    assert f"hydra-torch-data-engine {old} -> {new}" in upgraded.stdout
    assert f'"hydra-torch-data-engine=={new}",' in (dest / "pyproject.toml").read_text()
    assert [p.name for p in (dest / "vendor").iterdir()] == [wheel.name]
    assert {name: fingerprint(dest / name) for name in owned} == owned

    evaluated = run(python, "train.py", *small, "mode=eval", "eval.checkpoint=old_run",
                    "hydra.run.dir=eval_old")  # fmt: skip
    assert (dest / "eval_old" / "metrics.json").is_file(), evaluated.stdout[-2000:]
    composed = (dest / "eval_old" / ".hydra" / "config.yaml").read_text()
    assert f"{NEW_KEY}: new" in composed  # the new release's key, by its default
    run(python, "train.py", *small, "hydra.run.dir=new_run")
    assert (dest / "new_run" / "checkpoints" / "last.pt").is_file()
