"""`make upgrade-engine`: a project made by `make new-project` moves to the engine's next
release with one command, its src/ and conf/ untouched; the release's new config key reaches
its runs with the default, and a checkpoint the older engine wrote still evaluates. An upgrade
that fails, is refused or is killed leaves a project that sets up (the fast tests below: pip
faked, wheels of a few bytes)."""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

from tools.new_project import build_wheel, engine_version, without_targets
from tools.upgrade_engine import STAGING, installed, setup, upgrade

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
    assert "What changed: .venv/lib/python" in upgraded.stdout  # its CHANGELOG, installed

    evaluated = run(python, "train.py", *small, "mode=eval", "eval.checkpoint=old_run",
                    "hydra.run.dir=eval_old")  # fmt: skip
    assert (dest / "eval_old" / "metrics.json").is_file(), evaluated.stdout[-2000:]
    composed = (dest / "eval_old" / ".hydra" / "config.yaml").read_text()
    assert f"{NEW_KEY}: new" in composed  # the new release's key, by its default
    run(python, "train.py", *small, "hydra.run.dir=new_run")
    assert (dest / "new_run" / "checkpoints" / "last.pt").is_file()


PYPROJECT = """[project]
name = "proj"
dependencies = [
    # the library under this project, pinned
    "{pin}",
    "torch==2.14.1",
]
"""
OLD, NEW = "3.0.0", "3.1.0"


def wheel_file(folder: Path, version: str, metadata: str | bytes | None = None) -> Path:
    """An engine wheel named for `version` holding only its METADATA (by default, the truth)."""
    path = folder / f"hydra_torch_data_engine-{version}-py3-none-any.whl"
    if metadata is None:
        metadata = f"Metadata-Version: 2.1\nName: hydra-torch-data-engine\nVersion: {version}\n"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr(f"hydra_torch_data_engine-{version}.dist-info/METADATA", metadata)
    return path


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """What an upgrade reads of a set-up project: the pin, vendor/ with its wheel, the stamp."""
    root = tmp_path / "proj"
    (root / "vendor").mkdir(parents=True)
    (root / "pyproject.toml").write_text(PYPROJECT.format(pin=f"hydra-torch-data-engine=={OLD}"))
    wheel_file(root / "vendor", OLD)
    (root / ".venv").mkdir()
    (root / ".venv" / ".installed").touch()
    return root


@pytest.fixture
def pip(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, ...]]:
    """pip's installs, recorded instead of run; the engine reads as installed at OLD."""
    calls: list[tuple[str, ...]] = []
    monkeypatch.setattr("tools.upgrade_engine._pip", lambda *args: calls.append(args))
    monkeypatch.setattr("tools.upgrade_engine.installed", lambda: (OLD, ""))
    return calls


def state(root: Path) -> tuple[str, list[str]]:
    """The project as pip and make see it: pyproject.toml and every file under vendor/."""
    files = sorted(p.relative_to(root).as_posix() for p in (root / "vendor").rglob("*"))
    return (root / "pyproject.toml").read_text(), files


def refusal(raised: pytest.ExceptionInfo[SystemExit]) -> str:
    said = str(raised.value.code)
    assert "\n" not in said, said
    return said


def test_an_upgrade_commits_the_pin_and_the_wheel_and_names_the_changelog(
    project: Path, pip: list, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    wheel = wheel_file(tmp_path, NEW)
    log = project / ".venv/lib/python3.11/site-packages/engine/CHANGELOG.md"
    monkeypatch.setattr("tools.upgrade_engine.installed", lambda: (NEW, str(log)))
    said = upgrade(project, str(wheel), "")
    pyproject, files = state(project)
    assert f'"hydra-torch-data-engine=={NEW}",' in pyproject
    assert files == [f"vendor/{wheel.name}"]  # the old wheel and the staging folder gone
    assert (project / ".venv" / ".installed").is_file()
    assert said.endswith(
        "What changed: .venv/lib/python3.11/site-packages/engine/CHANGELOG.md (the engine's "
        "CHANGELOG). Next: make test"
    )
    assert pip[-1][-1] == str(project / STAGING / wheel.name)  # installed from the staged copy


def test_a_pin_line_it_cannot_rewrite_leaves_vendor_as_it_was(
    project: Path, pip: list, tmp_path: Path
) -> None:
    """The new wheel was copied into vendor/ first: two wheels, and make train, make setup and
    the next upgrade all stopped at pip's ResolutionImpossible."""
    pyproject = project / "pyproject.toml"
    pyproject.write_text(pyproject.read_text().replace(f"=={OLD}", ">=3"))
    before = state(project)
    with pytest.raises(SystemExit) as raised:
        upgrade(project, str(wheel_file(tmp_path, NEW)), "")
    said = refusal(raised)
    assert said.startswith('pyproject.toml: the engine pin "hydra-torch-data-engine>=3" has')
    assert state(project) == before and pip == []


@pytest.mark.parametrize(
    ("metadata", "said"),
    [
        ("Name: hydra-torch-data-engine\nVersion: 2.3.0\n", "says hydra-torch-data-engine 2.3.0, "
         "its file name hydra-torch-data-engine 9.9.9"),
        ("Name: torch\nVersion: 9.9.9\n", "says torch 9.9.9"),
        ("Name: hydra-torch-data-engine\n", "(no version)"),
        (b"Version: \xff\n", "is not UTF-8 text"),
        ("Version: 9.9.9\n" + "X" * (2 << 20), "is over 1048576 bytes"),
        (None, "is no readable wheel"),
    ],
)  # fmt: skip
def test_a_wheel_whose_own_metadata_disagrees_is_refused_in_one_line(
    project: Path, pip: list, tmp_path: Path, metadata: str | bytes | None, said: str
) -> None:
    """Named 9.9.9, it was pinned as ==9.9.9 whatever its METADATA said; read as hostile."""
    wheel = wheel_file(tmp_path, "9.9.9", metadata)
    if metadata is None:
        wheel.write_bytes(b"PK\x03\x04 not a zip")
    before = state(project)
    with pytest.raises(SystemExit) as raised:
        upgrade(project, str(wheel), "")
    assert refusal(raised).startswith(f"WHEEL={wheel}: ") and said in refusal(raised)
    assert refusal(raised).endswith("(pip wheel --no-deps engine/) and give that file.")
    assert state(project) == before and pip == []


def test_a_dependency_pip_cannot_install_leaves_the_project_as_it_was(
    project: Path, pip: list, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The new engine was pinned and the old wheel deleted before pip's raw traceback."""

    def no_dependency(*args: str) -> None:
        raise subprocess.CalledProcessError(1, ["pip", "install", *args])

    monkeypatch.setattr("tools.upgrade_engine._pip", no_dependency)
    before = state(project)
    with pytest.raises(SystemExit) as raised:
        upgrade(project, str(wheel_file(tmp_path, NEW)), "")
    assert refusal(raised) == (
        f"make upgrade-engine: pip could not install hydra-torch-data-engine=={NEW} with this "
        "project's dependencies (its error is above); pyproject.toml and vendor/ are as they were."
    )
    assert state(project) == before
    assert not (project / ".venv" / ".installed").exists()  # make setup checks .venv again


def test_an_upgrade_killed_while_pip_installs_is_undone_by_make_setup(
    project: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """kill -9 during pip left two wheels in vendor/: ResolutionImpossible from then on. Each
    moment pip runs is copied as a kill would leave it; make setup's first step undoes it."""
    killed: list[Path] = []

    def kill(*args: str) -> None:
        killed.append(Path(shutil.copytree(project, tmp_path / f"killed{len(killed)}")))

    monkeypatch.setattr("tools.upgrade_engine._pip", kill)
    monkeypatch.setattr("tools.upgrade_engine.installed", lambda: (OLD, ""))
    before = state(project)
    upgrade(project, str(wheel_file(tmp_path, NEW)), "")
    assert len(killed) == 2
    installs: list[tuple[str, ...]] = []
    monkeypatch.setattr("tools.upgrade_engine._pip", lambda *args: installs.append(args))
    for root in killed:
        installs.clear()
        setup(root)
        assert state(root) == before
        assert installs == [("--no-index", "--no-deps", str(root / before[1][0]))]
        assert not (root / ".venv" / ".installed").exists()


@pytest.mark.parametrize("pinned", [OLD, NEW])
def test_two_wheels_in_vendor_are_recovered_from_in_one_line(
    project: Path, pip: list, capsys: pytest.CaptureFixture, pinned: str
) -> None:
    """What a kill left (the old code's copy before pip, or this one's after its commit): the
    wheel the pin names stays, the other goes, and the upgrade goes on."""
    wheel_file(project / "vendor", NEW)
    (project / STAGING).mkdir()
    pyproject = project / "pyproject.toml"
    pyproject.write_text(pyproject.read_text().replace(OLD, pinned))
    setup(project)
    other = OLD if pinned == NEW else NEW
    assert capsys.readouterr().out == (
        "An interrupted make upgrade-engine was finished: pyproject.toml pins "
        f'"hydra-torch-data-engine=={pinned}", vendor/ holds '
        f"vendor/hydra_torch_data_engine-{pinned}-py3-none-any.whl (removed "
        f"hydra_torch_data_engine-{other}-py3-none-any.whl).\n"
    )
    assert state(project)[1] == [f"vendor/hydra_torch_data_engine-{pinned}-py3-none-any.whl"]


def test_two_wheels_and_no_pin_to_choose_between_them_is_one_line(project: Path, pip) -> None:
    wheel_file(project / "vendor", NEW)
    pyproject = project / "pyproject.toml"
    pyproject.write_text(pyproject.read_text().replace(f"=={OLD}", ">=3"))
    with pytest.raises(SystemExit) as raised:
        setup(project)
    assert refusal(raised).startswith("vendor/ holds 2 engine wheels (")
    assert refusal(raised).endswith(
        "and the pin says which stays: pyproject.toml: the engine pin "
        '"hydra-torch-data-engine>=3" has extras or a version range, and make setup and make '
        "upgrade-engine read "
        '"hydra-torch-data-engine==X.Y.Z" or "hydra-torch-data-engine @ url" alone; write it as '
        "one of those, then rerun."
    )
    assert pip == []


def test_make_setup_in_a_project_never_hands_pip_two_wheels(tmp_path: Path) -> None:
    """The copy's set-up installs the pinned wheel through tools.upgrade_engine --setup, which
    recovers first, never `pip install vendor/*.whl`."""
    (tmp_path / "Makefile").write_text(without_targets((ROOT / "Makefile").read_text()))
    (tmp_path / "pyproject.toml").touch()
    (tmp_path / "vendor").mkdir()
    for version in (OLD, NEW):
        wheel_file(tmp_path / "vendor", version)
    command = ["make", "-n", "-C", str(tmp_path), "setup"]
    plan = subprocess.run(command, capture_output=True, text=True, check=True).stdout
    assert ".venv/bin/python -m tools.upgrade_engine --setup" in plan
    assert ".whl" not in plan


@pytest.fixture(scope="module")
def engine_site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The engine's wheel, built from this checkout, installed alone into a folder of its own."""
    tmp = tmp_path_factory.mktemp("wheel")
    build_wheel(ROOT, tmp)
    (wheel,) = tmp.glob("*.whl")
    command = [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-index"]
    subprocess.run([*command, "--target", str(tmp / "site"), str(wheel)], check=True)
    return tmp / "site"


def test_the_engine_wheel_installs_its_changelog(
    engine_site: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The upgrade's report named a CHANGELOG.md that neither the project nor the wheel held."""
    monkeypatch.setenv("PYTHONPATH", str(engine_site))  # before the editable engine
    version, changelog = installed()
    assert version == engine_version(ROOT)
    assert changelog == str(engine_site / "engine" / "CHANGELOG.md")
    source = ROOT / "engine" / "src" / "engine" / "CHANGELOG.md"
    assert Path(changelog).read_text() == source.read_text()


def test_the_engine_wheel_installs_its_manual(engine_site: Path, tmp_path: Path) -> None:
    """A copy carried the engine's manual in its own docs/, which make upgrade-engine left
    stale: the wheel installs it (every page: engine/tests/test_package.py), and `python -m
    engine.docs` (make docs) names the installed one with its version."""
    manual = engine_site / "engine" / "docs"
    source = ROOT / "engine" / "src" / "engine" / "docs" / "README.md"
    assert (manual / "README.md").read_text() == source.read_text()
    env = {**os.environ, "PYTHONPATH": str(engine_site)}  # before the editable engine
    command = [sys.executable, "-m", "engine.docs"]
    done = subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True)
    assert done.stdout == (
        f"The engine's manual (hydra-torch-data-engine {engine_version(ROOT)}, installed with it "
        f"and upgraded by make upgrade-engine): {manual / 'README.md'}\n"
    ), done.stderr


def test_a_pinned_wheel_missing_from_vendor_is_one_line(project: Path, pip: list) -> None:
    """Not pip's "no matching distribution" from make setup."""
    (project / "vendor" / f"hydra_torch_data_engine-{OLD}-py3-none-any.whl").unlink()
    with pytest.raises(SystemExit) as raised:
        setup(project)
    assert refusal(raised) == (
        f"pyproject.toml pins hydra-torch-data-engine=={OLD}, whose wheel is not in vendor/: put "
        f"hydra_torch_data_engine-{OLD}-py3-none-any.whl there, or run make upgrade-engine "
        "WHEEL=path/to/it."
    )
    assert pip == []


MARKER = "; python_version>='3.10'"


@pytest.mark.parametrize("leftover", [False, True])
@pytest.mark.parametrize("step", ["setup", "upgrade"])
def test_a_pin_with_a_marker_is_refused_in_one_line_and_no_wheel_is_removed(
    project: Path, pip: list, tmp_path: Path, step: str, leftover: bool
) -> None:
    """Read as a URL pin, it made make setup remove every wheel in vendor/, the pinned one
    too, and install none; an upgrade rewrote the line without its marker."""
    pyproject = project / "pyproject.toml"
    pyproject.write_text(pyproject.read_text().replace(f"=={OLD}", f"=={OLD}{MARKER}"))
    if leftover:  # a killed upgrade's: recover() reads the pin to choose which wheel stays
        wheel_file(project / "vendor", NEW)
    before = state(project)
    with pytest.raises(SystemExit) as raised:
        if step == "setup":
            setup(project)
        else:
            upgrade(project, str(wheel_file(tmp_path, NEW)), "")
    assert refusal(raised).endswith(
        f'the engine pin "hydra-torch-data-engine=={OLD}{MARKER}" has an environment marker (the '
        "project imports the engine wherever it runs), and make setup and make upgrade-engine "
        'read "hydra-torch-data-engine==X.Y.Z" or "hydra-torch-data-engine @ url" alone; '
        "write it as one of those, then rerun."
    )
    assert state(project) == before and pip == []


def test_a_pin_with_a_comment_is_set_up_and_upgraded_with_its_comment(
    project: Path, pip: list, tmp_path: Path
) -> None:
    """`"...==3.0.0",  # why` was refused as missing by an upgrade, and make setup installed
    no wheel, silently."""
    pyproject = project / "pyproject.toml"
    comment = "  # the library under this project"
    pyproject.write_text(pyproject.read_text().replace(f'{OLD}",', f'{OLD}",{comment}'))
    setup(project)
    assert pip == [("--no-index", "--no-deps", str(project / state(project)[1][0]))]
    upgrade(project, str(wheel_file(tmp_path, NEW)), "")
    assert f'    "hydra-torch-data-engine=={NEW}",{comment}\n' in pyproject.read_text()


def test_make_setup_or_an_upgrade_during_an_upgrade_is_refused_naming_it(
    project: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """make setup run while an upgrade's pip ran took it for a killed one and undid it; the
    upgrade then died in a raw FileNotFoundError. Both are run here as another process would
    (a second open file: flock sets them apart as it does two processes)."""
    refused: list[str] = []
    running: list[bool] = []

    def meanwhile(*args: str) -> None:
        if running:  # the pip of a step let through (the old code's)
            return
        running.append(True)
        for step in (lambda: setup(project), lambda: upgrade(project, str(newer), "")):
            with pytest.raises(SystemExit) as raised:
                step()
            refused.append(refusal(raised))
        running.clear()

    newer = wheel_file(tmp_path, "3.2.0")
    monkeypatch.setattr("tools.upgrade_engine._pip", meanwhile)
    monkeypatch.setattr("tools.upgrade_engine.installed", lambda: (OLD, ""))
    upgrade(project, str(wheel_file(tmp_path, NEW)), "")
    assert state(project)[1] == [f"vendor/hydra_torch_data_engine-{NEW}-py3-none-any.whl"]
    assert len(refused) == 4
    holder = rf"make upgrade-engine \(pid {os.getpid()}, started [0-9T:-]+\)"
    for said, doing in zip(refused, ["make setup", "make upgrade-engine"] * 2, strict=True):
        assert re.fullmatch(
            rf"{doing}: {holder} is changing this project's engine \(\.venv/\.engine\.lock is "
            rf"locked\); let it end, or stop it \(a stopped upgrade is undone\), then rerun "
            rf"{doing}\.",
            said,
        ), said
    setup(project)  # let go once done


@pytest.mark.parametrize("link", [False, True])
def test_a_staging_path_that_is_no_folder_is_one_line(
    project: Path, pip: list, tmp_path: Path, link: bool
) -> None:
    """A file there made an upgrade die in a raw NotADirectoryError."""
    if link:
        (project / STAGING).symlink_to(tmp_path, target_is_directory=True)
    else:
        (project / STAGING).write_text("mine")
    before = state(project)
    for step in (
        lambda: setup(project),
        lambda: upgrade(project, str(wheel_file(tmp_path, NEW)), ""),
    ):
        with pytest.raises(SystemExit) as raised:
            step()
        assert refusal(raised) == (
            f"vendor/.upgrade is a {'link' if link else 'file'}, where make upgrade-engine "
            "stages a wheel in a folder of its own: move it out of vendor/, then rerun."
        )
    assert state(project) == before and pip == []


def test_a_lock_or_journal_that_is_a_link_is_refused_and_its_target_untouched(
    project: Path, tmp_path: Path
) -> None:
    """A link at .venv/.engine.lock had its target written over with the lock's line; a
    journal that is a link was copied over pyproject.toml (the second attack)."""
    target = tmp_path / "mine.txt"
    target.write_text("mine\n")
    (project / ".venv").mkdir(exist_ok=True)
    (project / ".venv" / ".engine.lock").symlink_to(target)
    with pytest.raises(SystemExit) as raised:
        setup(project)
    assert refusal(raised) == (
        "make setup: .venv/.engine.lock is a link, where make setup keeps its lock file: "
        "remove it, then rerun."
    )
    (project / ".venv" / ".engine.lock").unlink()
    staging = project / "vendor" / ".upgrade"
    staging.mkdir()
    (staging / "pyproject.toml.before").symlink_to(target)
    before = (project / "pyproject.toml").read_text()
    with pytest.raises(SystemExit) as raised:
        setup(project)
    assert refusal(raised).startswith(
        "vendor/.upgrade/pyproject.toml.before is no file of make upgrade-engine's own"
    )
    assert (project / "pyproject.toml").read_text() == before and target.read_text() == "mine\n"
