"""`make new-project`: a copy that is the user's own (named after its folder, its own README,
without the template's benchmarks), and the walk-through of docs/walkthrough.md run in it."""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tools.new_project import (
    ENGINE_TESTS,
    IMPORTS_BENCH,
    MAKE_TARGETS,
    NewProject,
    copy_template,
    engine_version,
    main,
    project_name,
    report,
    template_files,
    template_suite,
    without_targets,
)
from tools.upgrade_engine import source_requirement

ROOT = Path(__file__).resolve().parents[2]
# `make new-project` needs the set-up (its wheel is built with .venv's setuptools): -o takes it
# as done, so a pyproject.toml newer than the install never reinstalls into the checkout here
MAKE_NEW = ["make", "-s", "-o", ".venv/.installed", "new-project"]
NAME = b"hydra-torch-data-template"  # the template's own name
LEFT_OUT = {
    "BENCHMARKS.md",
    "bench/",
    "tests/test_bench_report.py",
    "tests/test_gpu_check.py",  # imports bench
    "tests/test_bench_decode.py",  # imports bench
    "tests/test_docs.py",
    "tests/process/test_new_project.py",
    "tests/process/test_upgrade_engine.py",
    "docs/regenerate.py",
    "docs/measure_times.py",
    "docs/elastic_resume.py",  # the engine manual's runs
    "docs/kfold_demo.py",
    "docs/multilabel_demo.py",
    "engine/",
    "tools/new_project.py",
    ENGINE_TESTS,
}
WALKTHROUGH = ROOT / "docs" / "walkthrough.md"
# a fenced block whose first comment (after an optional Hydra package header) names its file
FILE_BLOCK = re.compile(
    r"```(?:python|yaml)\n((?:# @package \S+\n)?)# ((?:src|conf)/\S+)\n(.*?)```", re.S
)
COMMANDS = re.compile(r"```bash\n# in the new project\n(.*?)```", re.S)


def walkthrough() -> tuple[list[tuple[str, str]], list[str]]:
    """The README section's files (path, content) and its shell commands, in order."""
    section = WALKTHROUGH.read_text()
    files = [
        (path, f"{header}# {path}\n{body}") for header, path, body in FILE_BLOCK.findall(section)
    ]
    commands = COMMANDS.search(section).group(1).strip().splitlines()  # type: ignore[union-attr]
    return files, commands


def test_readme_walkthrough_is_complete() -> None:
    files, commands = walkthrough()
    assert [p for p, _ in files] == [
        "src/datasets/my_listing.py",
        "conf/dataset/my_listing.yaml",
        "src/models/tiny.py",
        "conf/model/tiny.yaml",
        "src/losses/focal.py",
        "conf/loss/focal.yaml",
        "src/metrics/confident_errors.py",
        "conf/metrics/with_errors.yaml",
        "conf/experiment/my_first.yaml",
    ]
    assert commands[-1] == "make test"


@pytest.mark.slow
@pytest.mark.timeout(3600)  # the copy's own set-up and make test
def test_new_project_passes_its_own_tests_with_the_walkthrough(tmp_path: Path) -> None:
    dest = tmp_path / "my-project"
    subprocess.run(["make", "new-project", f"DEST={dest}"], cwd=ROOT, check=True)
    assert not (dest / ".git").exists() and not (dest / ".venv").exists()
    assert not (dest / "data").exists() and sorted((dest / "outputs").iterdir()) == [
        dest / "outputs" / ".gitkeep"
    ]
    assert (dest / "README.md").read_text().startswith("# my-project\n")
    assert not (dest / "bench").exists() and not (dest / "BENCHMARKS.md").exists()
    files, commands = walkthrough()
    for path, content in files:
        (dest / path).write_text(content)
    for command in commands:
        result = subprocess.run(command, shell=True, cwd=dest, capture_output=True, text=True)
        assert result.returncode == 0, f"{command}\n{result.stdout[-2000:]}{result.stderr[-3000:]}"


@pytest.mark.parametrize(
    ("folder", "name"),
    [("my-project", "my-project"), ("My Project!", "my-project"), ("exp_2024.v1", "exp-2024-v1")],
)
def test_the_project_is_named_after_its_folder(folder: str, name: str) -> None:
    assert project_name(folder) == name
    with pytest.raises(SystemExit, match="letters or digits"):
        project_name("!!!")


def _targets(folder: Path) -> set[str]:
    """The targets `make help` lists in `folder`."""
    command = ["make", "-s", "-C", str(folder), "help"]
    done = subprocess.run(command, capture_output=True, text=True, check=True)
    return {line.split()[0] for line in done.stdout.splitlines()}


def test_the_copy_is_the_users_own(tmp_path: Path) -> None:
    dest = tmp_path / "My Project"
    project = copy_template(ROOT, dest)
    assert project.name == "my-project" and {path for path, _ in project.left_out} == LEFT_OUT
    copied = {p.relative_to(dest).as_posix() for p in dest.rglob("*") if p.is_file()}
    copied -= {f"vendor/hydra_torch_data_engine-{engine_version(ROOT)}-py3-none-any.whl"}
    kept = {rel.as_posix() for rel in template_files(ROOT)} - LEFT_OUT
    kept = {rel for rel in kept if rel.split("/")[0] + "/" not in LEFT_OUT}  # bench/...
    kept = {rel for rel in kept if not rel.startswith("tests/")} | template_suite(ROOT)
    assert copied == kept and project.copied == len(kept)
    # what test_train.py and tests/process/test_train_processes.py import
    assert {"tests/cli.py", "tests/train_process.py"} <= kept
    assert sorted(rel for rel in kept if rel.startswith("tests/process/")) == [
        "tests/process/__init__.py",
        "tests/process/test_train_processes.py",
    ]
    assert not [rel for rel in kept if rel.startswith("tests/reliability/")]
    assert not [p for p in dest.rglob("*.py") if IMPORTS_BENCH.search(p.read_text())]
    ours, theirs = ((d / "pyproject.toml").read_text() for d in (dest, ROOT))
    assert re.search(r'^name = "my-project"$', ours, re.M)
    assert 'description = "TODO: say in one line what my-project does."' in ours
    lists = re.compile(r"^([a-z]+) = \[$", re.M)  # extras, dependencies, markers, ...
    assert set(lists.findall(ours)) == set(lists.findall(theirs)) - {"peers"}
    assert '    "my-project[scale]",\n' in ours  # dev pulls in the scale extra of this project
    naming = [p.name for p in dest.rglob("*") if p.is_file() and NAME in p.read_bytes()]
    assert naming == ["README.md"]  # "It started as a copy of ..."
    assert _targets(dest) == _targets(ROOT) - set(MAKE_TARGETS)
    assert not [t for t in _targets(dest) if t.startswith(("bench", "gpu"))]
    pin = f'"hydra-torch-data-engine=={engine_version(ROOT)}",'
    assert pin in ours and [p.name for p in (dest / "vendor").iterdir()] == [
        f"hydra_torch_data_engine-{engine_version(ROOT)}-py3-none-any.whl"
    ]
    assert not (ROOT / "engine" / "build").exists()  # the wheel was built from a copy
    readme = (dest / "README.md").read_text()
    assert readme.startswith("# my-project\n") and len(readme.splitlines()) <= 50
    assert "`train.py`, `conf/` and `src/` are this project's own" in readme
    assert "make upgrade-engine WHEEL=" in readme and pin.strip('",') in readme
    assert "make train" in readme and "make test" in readme and "(docs/README.md)" in readme
    layout = readme.split("## Layout\n\n```\n")[1].split("```")[0].splitlines()
    assert all((dest / line.split()[0]).exists() for line in layout)
    assert {"train.py", "conf/", "src/models/", "tests/"} <= {line.split()[0] for line in layout}
    told = report(project, ROOT, dest)
    assert all(path in told for path in LEFT_OUT) and "cp -r" in told and "bench-peers" in told
    # no link of its docs leads to a file that stayed in the template (9 did: the engine's
    # source, BENCHMARKS.md); such a link is its text and the template's path, or the page's
    # name in the engine's manual
    pages = [p for p in dest.rglob("*.md") if "vendor" not in p.parts]
    links = [(page, t) for page in pages for t in re.findall(r"\]\(([^)\s]+)\)", page.read_text())]
    dead = [
        (page.relative_to(dest).as_posix(), target)
        for page, target in links
        if ":" not in target and not (page.parent / target.split("#")[0]).exists()
    ]
    assert not dead, dead
    # its docs are its own files' (the engine's manual comes with the engine: make docs)
    assert sorted(p.name for p in (dest / "docs").iterdir()) == [
        "README.md",
        "configuration.md",
        "extending.md",
        "finetune_demo.py",
        "walkthrough.md",
    ]
    extending = (dest / "docs" / "extending.md").read_text()
    assert "see datasets (the engine manual's datasets.md#your-own-dataset-the-contract)" in (
        " ".join(extending.split())
    )
    assert (
        "the engine's manual (`make docs` prints where)"
        in (dest / "docs" / "README.md").read_text()
    )
    assert "make docs" in told and "make docs" in readme


RUNS = re.compile(r"python -m ([\w.]+)|python (\S+\.py)")


def test_every_target_of_the_copy_runs_what_the_copy_has(tmp_path: Path) -> None:
    """`make -n` of each target the copy's `make help` lists names only modules and scripts
    the copy holds or its environment installs (no bench/, no tools/new_project)."""
    dest = tmp_path / "mine"
    copy_template(ROOT, dest)
    for target in _targets(dest):
        # -n still runs a recipe line that calls $(MAKE) (test's lint report): BIN=/nowhere
        # makes such a line fail at once instead of running the tests
        command = ["make", "-n", "-C", str(dest), "BIN=/nowhere", target]
        done = subprocess.run(command, capture_output=True, text=True, check=False)
        plan = done.stdout
        for module, script in RUNS.findall(plan):
            if script:
                assert (dest / script).is_file(), f"make {target}: {script} is not in the copy"
                continue
            local = dest / (module.replace(".", "/") + ".py")
            found = local.is_file() or importlib.util.find_spec(module.split(".")[0]) is not None
            assert found and not module.startswith(("bench", "tools.new_project")), (
                f"make {target}: python -m {module} is neither in the copy nor installed"
            )


def test_a_folder_that_is_no_git_checkout_is_one_line(tmp_path: Path) -> None:
    with pytest.raises(SystemExit, match=rf"{tmp_path} is not one \(fatal: not a git repository"):
        template_files(tmp_path)


@pytest.mark.parametrize("dest", ["sub", "src/x", ".git/proj", "outputs/new", "-x", "link/new"])
def test_a_dest_inside_the_template_is_refused_and_nothing_is_written(tmp_path, dest) -> None:
    """A relative DEST lands in the template (make runs there), as does a link into it."""
    (tmp_path / "link").symlink_to(ROOT / "src", target_is_directory=True)
    given = str(tmp_path / dest) if dest.startswith("link") else dest
    before = sorted(p.name for p in ROOT.iterdir())
    done = subprocess.run([*MAKE_NEW, f"DEST={given}"], cwd=ROOT, capture_output=True, text=True)
    assert done.returncode != 0
    assert f"DEST={given!r} is " in done.stderr and f"inside the template {ROOT}" in done.stderr
    assert sorted(p.name for p in ROOT.iterdir()) == before
    assert not (ROOT / "src" / "new").exists() and not (ROOT / dest).exists()


def test_dest_is_never_run_as_code(tmp_path: Path) -> None:
    """make never expands DEST and the shell never reads it: quotes, ;, backticks, $(...)."""
    payloads = [
        f'{tmp_path}/a"; touch {tmp_path}/S1; echo "',
        f"$(shell touch {tmp_path}/S2)",
        f"`touch {tmp_path}/S3`",
        f"{tmp_path}/b'; touch {tmp_path}/S4; echo '",
    ]
    for dest in payloads:
        subprocess.run([*MAKE_NEW, f"DEST={dest}"], cwd=ROOT, capture_output=True)
    assert not [p.name for p in tmp_path.iterdir() if p.name.startswith("S")]
    assert (tmp_path / 'a"; touch ').is_dir()  # the folder asked for, quotes and all


@pytest.mark.parametrize(("target", "key"), [("new-project", "DEST"), ("upgrade-engine", "WHEEL")])
def test_a_value_holding_a_newline_is_refused_in_one_line(tmp_path: Path, target, key) -> None:
    """make splits a recipe at a newline in a value, quotes or not: the rest ran as a command."""
    value = f"{tmp_path}/a\ntouch {tmp_path}/S; echo "
    done = subprocess.run(
        ["make", "-s", "-o", ".venv/.installed", target, f"{key}={value}"],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert done.returncode != 0 and not (tmp_path / "S").exists()
    assert f"*** {key} holds a newline, which would split the command make runs: give {key} on" in (
        done.stderr.strip()
    )
    assert len(done.stderr.strip().splitlines()) == 1


def test_an_interrupted_copy_leaves_no_half_project(tmp_path: Path, monkeypatch) -> None:
    copied = []

    def killed_midway(source: Path, target: Path) -> None:
        if len(copied) == 20:
            raise KeyboardInterrupt
        copied.append(target)
        target.write_bytes(Path(source).read_bytes())

    monkeypatch.setattr("tools.new_project.shutil.copy2", killed_midway)
    with pytest.raises(KeyboardInterrupt):
        copy_template(ROOT, tmp_path / "proj")
    assert list(tmp_path.iterdir()) == []  # neither proj nor the hidden copy it was written in


FIRST_FILE = """import sys
import os


def listing(root):
    return sorted(os.path.join(root, name, "") for name in os.listdir(root) if not name.startswith(sys.prefix) and name)
"""


def test_a_users_first_file_is_formatted_and_never_stops_the_tests(tmp_path: Path) -> None:
    """A 120-character line and unsorted imports in a project's own file: `make test` runs the
    tests and names the file in its lint report; `make format` fixes both and exits 0."""
    dest = tmp_path / "mine"
    copy_template(ROOT, dest)
    (dest / ".venv").symlink_to(ROOT / ".venv")  # this checkout's, installed: no second set-up
    for path in [dest / "pyproject.toml", *(dest / "vendor").glob("*.whl")]:
        os.utime(path, (0, 0))  # older than the venv's install stamp
    mine = dest / "src" / "datasets" / "my_listing.py"
    mine.write_text(FIRST_FILE)
    assert max(len(line) for line in FIRST_FILE.splitlines()) == 120

    def make(*args: str) -> subprocess.CompletedProcess:
        command = ["make", "--no-print-directory", "-C", str(dest), *args]
        return subprocess.run(command, capture_output=True, text=True)

    tested = make(
        "test", "PYTEST_WORKERS=0", "ARGS=tests/test_losses_metrics.py -q -p no:cacheprovider"
    )
    said = tested.stdout + tested.stderr
    assert tested.returncode == 0, said[-3000:]
    assert re.search(r"\d+ passed", said)  # the tests ran
    lint = said.split("== lint")[1]
    assert "src/datasets/my_listing.py" in lint and "I001" in lint  # the import order
    assert "src/datasets/my_listing.py:6" in lint and "reformatted" in lint  # the long line
    formatted = make("format")
    assert formatted.returncode == 0, formatted.stdout + formatted.stderr
    text = mine.read_text()
    assert max(len(line) for line in text.splitlines()) <= 100
    assert text.index("import os") < text.index("import sys")
    assert make("lint").returncode == 0


def test_a_git_file_url_is_pinned_as_pip_reads_it(tmp_path: Path) -> None:
    """ENGINE=git+file:///repo@tag was pinned as given, and make setup died in pip's traceback
    (its requirement parser wants a host): pinned as file://localhost/, pip fetches it."""
    repo = tmp_path / "repo"
    (repo / "engine").mkdir(parents=True)
    (repo / "engine" / "pyproject.toml").write_text(
        '[project]\nname = "hydra-torch-data-engine"\nversion = "9.0.0"\n'
        "[tool.setuptools]\npy-modules = []\n"
    )
    git = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t"]
    for command in (["init", "-q"], ["add", "-A"], ["commit", "-qm", "v9"], ["tag", "v9"]):
        subprocess.run([*git, *command], check=True)
    requirement = source_requirement(f"git+file://{repo}@v9")
    assert requirement == (
        f"hydra-torch-data-engine @ git+file://localhost{repo}@v9#subdirectory=engine"
    )
    command = [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--no-index"]
    command += ["--no-build-isolation", "-d", str(tmp_path / "got"), requirement]
    done = subprocess.run(command, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert [p.name for p in (tmp_path / "got").iterdir()] == ["hydra-torch-data-engine-9.0.0.zip"]


@pytest.mark.parametrize("url", ["git+file://tmp/x@v9", "git+file:/tmp/x@v9"])
def test_a_git_file_url_without_three_slashes_is_refused_in_one_line(url: str) -> None:
    """git+file://tmp/x (host tmp) was pinned, and git failed on '/x'; git+file:/tmp/x was
    too, and git tried ssh to a host named file."""
    with pytest.raises(SystemExit) as raised:
        source_requirement(url)
    assert raised.value.code == (
        f"ENGINE={url!r}: a git file URL names its folder after three slashes; give "
        "git+file:///tmp/x@v9 (git+file:///path/to/repo@TAG)."
    )
    assert source_requirement("git+file://localhost/tmp/x@v9") == (
        "hydra-torch-data-engine @ git+file://localhost/tmp/x@v9#subdirectory=engine"
    )


def test_the_other_spellings_of_a_git_file_url_get_the_right_advice(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The second attack: LOCALHOST was told to become ///LOCALHOST/..., a relative folder a
    different absolute one, an empty URL the root; four slashes were pinned with two."""
    monkeypatch.chdir(tmp_path)
    pinned = "hydra-torch-data-engine @ git+file://localhost/tmp/x@v9#subdirectory=engine"
    for url in ("git+file://LOCALHOST/tmp/x@v9", "git+file:////tmp/x@v9"):
        assert source_requirement(url) == pinned
    with pytest.raises(SystemExit) as raised:
        source_requirement("git+file:repos/x@v9")
    assert f"give git+file://{tmp_path}/repos/x@v9 " in str(raised.value.code)
    with pytest.raises(SystemExit) as raised:
        source_requirement("git+file://")
    assert raised.value.code == (
        "ENGINE='git+file://' names no folder; give git+file:///path/to/repo@TAG."
    )


@pytest.mark.parametrize(
    "folder", ["torchvision", "torch", "hydra", "Hydra_Core", "omegaconf", "PIL", "pillow",
               "tensorboard", "numpy", "engine", "timm", "pytest"],
)  # fmt: skip
def test_a_dest_named_like_a_dependency_is_refused_in_one_line(tmp_path: Path, folder) -> None:
    """DEST=.../torchvision made a project pip takes for torchvision: the template's and the
    engine's dependencies (any extra) and their import names are refused, nothing written."""
    with pytest.raises(SystemExit) as raised:
        main([str(tmp_path / folder)])
    said = str(raised.value.code)
    name = project_name(folder)
    assert said == (
        f"DEST={str(tmp_path / folder)!r} names the project {name!r}, as the template names a "
        "package it depends on (pip would take one for the other): name the folder otherwise, "
        f"e.g. DEST={tmp_path}/my-{name}."
    )
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    ("folder", "owner"),
    [("pip", "pip"), ("setuptools", "setuptools"), ("filelock", "filelock"),
     ("typing_extensions", "typing_extensions"), ("yaml", "PyYAML")],
)  # fmt: skip
def test_a_dest_named_like_an_installed_package_is_refused_in_one_line(
    tmp_path: Path, folder: str, owner: str
) -> None:
    """The template's dependencies bring others they do not name: DEST=../pip made a project
    pip takes for pip. Every installed distribution's name and import names are refused."""
    with pytest.raises(SystemExit) as raised:
        main([str(tmp_path / folder)])
    name = project_name(folder)
    assert raised.value.code == (
        f"DEST={str(tmp_path / folder)!r} names the project {name!r}, as {owner}, installed with "
        "the template's dependencies, is named or imported (pip would take one for the "
        f"other): name the folder otherwise, e.g. DEST={tmp_path}/my-{name}."
    )
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(("umask", "mode"), [(0o022, 0o755), (0o027, 0o750), (0o002, 0o775)])
def test_the_new_folder_follows_the_umask(tmp_path: Path, monkeypatch, umask, mode) -> None:
    """It was 0700 whatever the umask (mkdtemp's mode, kept by the rename): as mkdir now."""
    monkeypatch.setattr("tools.new_project._copy", lambda *args: NewProject("mine", 0, []))
    before = os.umask(umask)
    try:
        copy_template(ROOT, tmp_path / "mine")
    finally:
        os.umask(before)
    assert (tmp_path / "mine").stat().st_mode & 0o777 == mode


def test_a_venv_set_up_at_another_path_stops_make_setup_in_one_line(tmp_path: Path) -> None:
    """A copy moved after make setup kept a .venv whose scripts run the old path's python, and
    make setup said there was nothing to do."""
    project = tmp_path / "moved here"
    (project / ".venv").mkdir(parents=True)
    (project / "Makefile").write_text(without_targets((ROOT / "Makefile").read_text()))
    (project / "pyproject.toml").touch()
    os.utime(project / "pyproject.toml", (0, 0))  # the stamp is newer
    stamp = project / ".venv" / ".installed"

    def setup() -> subprocess.CompletedProcess:
        command = ["make", "-s", "--no-print-directory", "-C", str(project), "setup"]
        return subprocess.run(command, capture_output=True, text=True)

    stamp.write_text(str(tmp_path / "proj" / ".venv"))  # set up there, then moved
    done = setup()
    assert done.returncode != 0 and done.stdout == ""
    (line,) = done.stderr.strip().splitlines()
    assert line.endswith(
        f": *** .venv was set up at {tmp_path}/proj/.venv, and this project is now at {project} "
        "(moved or copied): its scripts still run from there; rm -rf .venv, then make setup.  Stop."
    )
    stamp.write_text(str(project / ".venv"))  # as the set-up records it: nothing to do
    assert setup().returncode == 0
    stamp.unlink()
    plan = subprocess.run(
        ["make", "-n", "-C", str(project), "setup"], capture_output=True, text=True
    )
    assert f"printf '%s' '{project}/.venv' > .venv/.installed" in plan.stdout


UNCOMMENTED = "# my model\n_target_: src.models.tiny.Tiny\nwidths: [8, 16]\n"


@pytest.mark.parametrize("template", [False, True])
def test_an_uncommented_yaml_key_is_reported_in_a_copy_and_fails_the_template(
    tmp_path: Path, template: bool
) -> None:
    """The YAML-comment rule failed a copy's make test, though style never does there (the
    README): in a copy its finding is a warning; in the template (it has engine/) a failure."""
    dest = tmp_path / "mine"
    copy_template(ROOT, dest)
    (dest / "conf" / "model" / "bare.yaml").write_text(UNCOMMENTED)
    if template:
        (dest / "engine").mkdir()
        (dest / "engine" / "pyproject.toml").touch()
    test = "tests/test_config.py::test_every_yaml_key_has_a_comment"
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-n", "0", test]
    env = {**os.environ, "PYTHONPATH": str(ROOT / "engine" / "src")}  # as its wheel would
    done = subprocess.run(command, cwd=dest, env=env, capture_output=True, text=True)
    said = done.stdout + done.stderr
    assert "bare.yaml:3: 'widths: [8, 16]'" in said
    assert done.returncode == (1 if template else 0), said[-3000:]
    assert ("1 passed, 1 warning" in said) != template
