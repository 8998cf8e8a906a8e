"""`make new-project DEST=../my-project`: copy the template into a project of the user's own.

Copies what git tracks or would track (so no outputs, data, virtualenv, caches or .git), less
what only the template needs (its benchmarks, the tests of its own README, the engine's
source). The engine becomes a dependency like any other: its wheel, built here, goes in the
project's vendor/ and pyproject.toml pins its version (or ENGINE=git+URL@TAG, or a path, is
written instead); `make upgrade-engine` moves the pin later. Names the project after DEST and
writes a short README.md of its own. The new tree passes its own `make test`. Standard
library and pip only.
"""

from __future__ import annotations

import ast
import importlib.metadata
import os
import re
import secrets
import shlex
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from tools.upgrade_engine import VENDOR, pinned, source_requirement

# What only the template needs, with why; a folder ends with "/". Tests that import bench are
# left out too (found by reading them).
TEMPLATE_ONLY = {
    "BENCHMARKS.md": "the template's benchmark results",
    "bench/": "`make bench`: the template's input-pipeline benchmark",
    "tests/test_bench_report.py": "tests bench/",
    "tests/test_docs.py": "checks the template's README (its shown outputs and commands)",
    "tests/process/test_new_project.py": "checks make new-project and its walk-through (docs/walkthrough.md)",
    "docs/regenerate.py": "`make docs-outputs`: rewrites the template's README and docs",
    "docs/measure_times.py": "`make docs-outputs`: times the template's README states",
    "docs/elastic_resume.py": "`make docs-outputs`: a run the engine's manual shows",
    "docs/kfold_demo.py": "`make docs-outputs`: a run the engine's manual shows",
    "docs/multilabel_demo.py": "`make docs-outputs`: a run the engine's manual shows",
    "engine/": "the engine's source: the project installs its wheel (vendor/, pinned)",
    "tools/new_project.py": "`make new-project` itself",
    "tests/process/test_upgrade_engine.py": "builds engine wheels from the template's engine/",
}
# The template's own suite, what a project copies: what the user owns (every option of every
# group composes and passes the checks, a 1-epoch run per dataset kind, the losses, metrics,
# transforms, models and experiments of src/ and conf/), with the helpers these import. The
# rest of tests/ proves the engine's guarantees through this template: it stays here.
TEMPLATE_SUITE = (
    "tests/conftest.py",
    "tests/test_config.py",
    "tests/test_engine_conf.py",
    "tests/test_experiments.py",
    "tests/test_local_paths.py",
    "tests/test_losses_metrics.py",
    "tests/test_public_imports.py",
    "tests/test_sequences.py",
    "tests/test_train.py",
    "tests/process/__init__.py",
    "tests/process/test_train_processes.py",
    "tests/test_transforms.py",
)
ENGINE_TESTS = "tests/ (the rest)"
IMPORTS_TESTS = re.compile(r"^\s*(?:from|import) tests\.([\w.]+)", re.M)
# Makefile targets of what is left out
MAKE_TARGETS = (
    "bench",
    "bench-growth",
    "bench-decode",
    "bench-ab",
    "bench-guard",
    "bench-compile",
    "bench-parquet",
    "bench-sampling",
    "bench-start",
    "bench-threads",
    "bench-totals",
    "bench-peers",
    "gpu-check",
    "docs-outputs",
    "new-project",
    "stress-torchrun",
)
# The Makefile's engine source: the template's, the copy's (the wheel pyproject.toml pins)
ENGINE_LINES = (
    ("ENGINE_INSTALL := -e ./engine", f"ENGINE_INSTALL := --find-links {VENDOR}"),
    ("ENGINE_FILES := engine/pyproject.toml", f"ENGINE_FILES := $(wildcard {VENDOR}/*.whl)"),
    ("ENGINE_FIRST :=", "ENGINE_FIRST := $(BIN)/python -m tools.upgrade_engine --setup"),
)
PIN_COMMENT = (
    "    # engine/: the library under the template (make setup installs it from that folder)\n",
    "    # the library under this project, pinned (make upgrade-engine WHEEL=... or ENGINE=...)\n",
)
EXTRAS = ("peers",)  # pyproject extras of bench/
IMPORTS_BENCH = re.compile(r"^\s*(?:from|import) bench\b", re.M)
DESCRIPTION = "TODO: say in one line what {name} does."

README = """# {name}

TODO: say here what {name} does and how to use it. It started as a copy of the Hydra + PyTorch
template `{template}`.

## Two layers

`train.py`, `conf/` and `src/` are this project's own: edit them freely (your datasets,
models, losses, metrics, the train step in `src/step.py`, the training loop in `src/loop.py`).
Under them is the engine, a dependency pinned in `pyproject.toml` like any other:
{engine}. Move to a newer release with one command, which leaves `src/` and `conf/` as they
are: `make upgrade-engine WHEEL=path/to/hydra_torch_data_engine-X.Y.Z-py3-none-any.whl` (or
`ENGINE=git+https://...@vX.Y.Z`). What you may import from it: its manual's engine.md.

## The two commands

```bash
make train   # creates .venv, installs the pinned dependencies, writes data/demo, trains
make test    # the same set-up, then ruff and the test suite
```

`make help` lists the other targets; `make train ARGS="dataset=csv trainer.max_epochs=5"`
passes config overrides. Other commands (`python train.py ...` in docs/) run in the environment
`make train` made: `source .venv/bin/activate` once per shell, or `.venv/bin/python train.py`.
Fine-tune a pretrained model on a folder of your photos (one subfolder per class):
`.venv/bin/python train.py experiment=finetune dataset.root=/path/to/photos`
(docs/walkthrough.md).

## Layout

```
{layout}
```

## Documentation

`docs/` covers this project's own files: start at [docs/README.md](docs/README.md). What the
engine does is its manual, installed and upgraded with the engine: `make docs` prints where.
"""


@dataclass
class NewProject:
    """What copy_template made: the project's name, the files copied, what was left out."""

    name: str
    copied: int
    left_out: list[tuple[str, str]]  # (path, why)


def engine_version(root: Path) -> str:
    """The version of the engine source at `root` (engine/src/engine/__init__.py), read as
    text: `make new-project` runs before any virtualenv exists, so nothing is imported."""
    init = (root / "engine" / "src" / "engine" / "__init__.py").read_text(encoding="utf-8")
    found = re.search(r'^__version__ = "([^"]+)"$', init, re.M)
    if found is None:
        raise SystemExit(f"{root}/engine/src/engine/__init__.py sets no __version__")
    return found[1]


def template_files(root: Path) -> list[Path]:
    """Files of the checkout at `root` that git tracks or would track, as relative paths."""
    command = ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"]
    try:
        listing = subprocess.run(command, cwd=root, check=True, capture_output=True, text=True)
    except FileNotFoundError:
        raise SystemExit(
            "make new-project lists the template's files with git, which is not installed: "
            "install git, or copy the folder by hand (leaving out outputs/, data/ and .venv/)."
        ) from None
    except subprocess.CalledProcessError as err:
        said = (err.stderr.strip().splitlines() or ["git ls-files failed"])[0]
        raise SystemExit(
            f"make new-project copies a git checkout, and {root} is not one ({said}): run it "
            "in a clone of the template."
        ) from None
    names = sorted(set(listing.stdout.split("\0")))
    return [Path(p) for p in names if p and (root / p).is_file()]


def normalised(name: str) -> str:
    """`name` as a distribution name, "" when it holds no letter or digit: `My Project!` ->
    my-project, typing_extensions -> typing-extensions."""
    return re.sub(r"[^A-Za-z0-9]+", "-", name).strip("-").lower()


def project_name(folder: str) -> str:
    """A valid, normalised distribution name from a folder name: `My Project!` -> my-project."""
    name = normalised(folder)
    if not name:
        raise SystemExit(
            f"DEST={folder!r}: name the folder with ASCII letters or digits (it names the "
            "Python package of the project)."
        )
    return name


def template_suite(root: Path) -> set[str]:
    """TEMPLATE_SUITE and the modules of tests/ they import, at any depth."""
    suite, todo = set(), list(TEMPLATE_SUITE)
    while todo:
        path = todo.pop()
        if path not in suite:
            suite.add(path)
            text = (root / path).read_text(encoding="utf-8")
            todo += [f"tests/{name.replace('.', '/')}.py" for name in IMPORTS_TESTS.findall(text)]
    return suite


def _template_only(root: Path, rel: Path, suite: set[str]) -> tuple[str, str] | None:
    """(the file or folder left out, why) when `rel` stays behind; None when it is copied."""
    posix = rel.as_posix()
    for path, why in TEMPLATE_ONLY.items():
        if posix == path or (path.endswith("/") and posix.startswith(path)):
            return path, why
    is_test = rel.parts[0] == "tests" and rel.suffix == ".py"
    if is_test and IMPORTS_BENCH.search((root / rel).read_text(encoding="utf-8")):
        return posix, "imports bench/"
    if rel.parts[0] == "tests" and posix not in suite:
        return ENGINE_TESTS, "the engine's guarantees, proven through this template: its suite"
    return None


def renamed_pyproject(text: str, name: str) -> str:
    """pyproject.toml of project `name`: its name (also where its own extras are referenced), a
    description to write, and without the extras of bench/."""
    old = re.search(r'^name = "([^"]+)"$', text, re.M)
    if old is None:
        raise ValueError('pyproject.toml has no line `name = "..."`')
    text = text.replace(old.group(0), f'name = "{name}"', 1).replace(f'"{old[1]}[', f'"{name}[')
    description = DESCRIPTION.format(name=name)
    text = re.sub(
        r'^description = ".*"$', f'description = "{description}"', text, count=1, flags=re.M
    )
    for extra in EXTRAS:  # with the comment lines right above it
        text = re.sub(rf"(?:^#.*\n)*^{extra} = \[\n(?:.*\n)*?^\]\n", "", text, flags=re.M)
    return text


LINT_GATE = ("LINT_IN_TEST ?= fail", "LINT_IN_TEST ?= report")  # the template's, the copy's


def without_targets(makefile: str) -> str:
    """The Makefile without the targets of what is left out (each rule, its recipe, its .PHONY
    entry), installing the pinned engine, and with lint findings listed by `make test` rather
    than failing it: a user's style never stops their tests (`make lint` still fails on them)."""
    for template, copy in (LINT_GATE, *ENGINE_LINES):
        if template not in makefile:
            raise ValueError(f"the Makefile has no line `{template}`")
        makefile = makefile.replace(template, copy, 1)
    for target in MAKE_TARGETS:
        makefile = re.sub(rf"^{target}:.*\n(?:\t.*\n)*\n?", "", makefile, flags=re.M)
        makefile = re.sub(rf"^(\.PHONY:.*?) {target}(?= |$)", r"\1", makefile, flags=re.M)
    return makefile


def _summary(path: Path) -> str:
    """The first sentence of a module's docstring, cut at a colon when long."""
    doc = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8"))) or ""
    sentence = " ".join(doc.split("\n\n")[0].split()).split(". ")[0].rstrip(".")
    return sentence.split(": ")[0] if len(sentence) > 70 else sentence


def layout(dest: Path) -> str:
    """One line per place of the code in `dest`, described by its own docstrings."""
    rows = [
        ("train.py", _summary(dest / "train.py")),
        ("conf/", "config.yaml picks one option per group; one folder per group"),
    ]
    rows += [(f"src/{p.parent.name}/", _summary(p)) for p in sorted(dest.glob("src/*/__init__.py"))]
    modules = [p for p in sorted(dest.glob("src/*.py")) if p.name != "__init__.py"]
    rows += [(f"src/{p.name}", _summary(p)) for p in modules]
    if (dest / VENDOR).is_dir():
        rows.append((f"{VENDOR}/", "the engine's wheel, the version pyproject.toml pins"))
    rows.append(("tools/", "`make upgrade-engine`: move the engine pin, reinstall"))
    rows.append(("tests/", "the test suite: `make test` (all), `make test-fast` (while coding)"))
    if (dest / "docs").is_dir():
        rows.append(("docs/", "this project's own docs (the engine's manual: make docs)"))
    width = max(len(path) for path, _ in rows) + 2
    return "\n".join(f"{path:<{width}}{what}".rstrip() for path, what in rows)


# Import names of dependencies whose distribution is named otherwise, and the engine's packages
IMPORT_NAMES = {"hydra", "pil", "engine", "engine-dev"}
TABLE = re.compile(r"^\[([^\]\n]+)\]\n(.*?)(?=^\[|\Z)", re.M | re.S)  # [name] and its lines
DEPENDENCIES = re.compile(r"^dependencies = \[\n(.*?)^\]", re.M | re.S)
REQUIREMENT = re.compile(r'^\s*"([A-Za-z0-9][A-Za-z0-9._-]*)', re.M)  # a list item's name


def dependency_names(root: Path) -> set[str]:
    """The normalised names of what the template and its engine depend on (any extra), and of
    the packages they import as: a project may be named like none of them."""
    found = set(IMPORT_NAMES)
    for pyproject in (root / "pyproject.toml", root / "engine" / "pyproject.toml"):
        for table, body in TABLE.findall(pyproject.read_text(encoding="utf-8")):
            if table == "project":
                listed = DEPENDENCIES.search(body)
                body = listed[1] if listed else ""
            elif table != "project.optional-dependencies":
                continue
            found |= {project_name(name) for name in REQUIREMENT.findall(body)}
    return found - {template_name(root)}  # dev's "<its own name>[scale]"


def template_name(root: Path) -> str:
    """The template's distribution name (its pyproject.toml's), "" when it names none."""
    found = re.search(r'^name = "([^"]+)"$', (root / "pyproject.toml").read_text(), re.M)
    return found[1] if found else ""


def installed_names(skip: str) -> dict[str, str]:
    """The normalised names of every distribution installed here (but `skip`) and of the
    packages each imports as (its top_level.txt, else its RECORD's top-level entries), each
    with the distribution's name: what the template's dependencies bring without naming it
    (pip, setuptools, filelock, typing_extensions) is taken as well."""
    found: dict[str, str] = {}
    for dist in importlib.metadata.distributions():
        owner = dist.metadata["Name"]
        if not owner or normalised(owner) == skip:
            continue
        listed = dist.read_text("top_level.txt")
        tops = set(listed.split()) if listed else set()
        for file in () if listed else dist.files or ():
            top, nested = file.parts[0], len(file.parts) > 1
            if nested and top not in ("..", "__pycache__") and not top.endswith(".dist-info"):
                tops.add(top)  # a package
            elif not nested and file.suffix in (".py", ".so"):
                tops.add(top.split(".")[0])  # a module: typing_extensions.py
        for name in {owner, *tops}:
            if normal := normalised(name):
                found.setdefault(normal, owner)
    return found


def check_dest(root: Path, dest: Path, given: str) -> None:
    """`dest` (resolved, links followed) must be a new folder outside the template at `root`:
    a copy inside it becomes a nested project that the template's next lint, test or copy
    takes in (each copy then holds every earlier one). Its name must not be a dependency's,
    direct or installed with them (pip, filelock): pip would take the project installed as
    `torchvision` for torchvision."""
    if dest.exists() or dest.is_symlink():
        raise SystemExit(f"{dest} already exists; choose a new folder for DEST.")
    if dest.is_relative_to(root):
        raise SystemExit(
            f"DEST={given!r} is {dest}, inside the template {root}: a project there would be "
            "taken into the template's own lint, tests and copies; choose a folder outside it, "
            "e.g. DEST=../my-project."
        )
    name = project_name(dest.name)
    other = os.path.join(os.path.dirname(given.rstrip("/")), f"my-{name}")
    if name in dependency_names(root):
        raise SystemExit(
            f"DEST={given!r} names the project {name!r}, as the template names a package it "
            f"depends on (pip would take one for the other): name the folder otherwise, e.g. "
            f"DEST={other}."
        )
    owner = installed_names(template_name(root)).get(name)
    if owner is not None:
        raise SystemExit(
            f"DEST={given!r} names the project {name!r}, as {owner}, installed with the "
            "template's dependencies, is named or imported (pip would take one for the "
            f"other): name the folder otherwise, e.g. DEST={other}."
        )


def build_wheel(root: Path, into: Path) -> str:
    """Build the engine's wheel from `root`/engine into folder `into`; its requirement. Built
    from a copy of the source, so the template's checkout gets no build/ or egg-info."""
    with tempfile.TemporaryDirectory() as scratch:
        source = shutil.copytree(
            root / "engine",
            Path(scratch) / "engine",
            ignore=shutil.ignore_patterns("__pycache__", "build", "*.egg-info", "tests"),
        )
        command = [sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps"]
        command += ["--no-build-isolation", str(source), "-w", str(into)]
        subprocess.run(command, check=True)
    return f"hydra-torch-data-engine=={engine_version(root)}"


LINK = re.compile(r"\[([^\]\n]+)\]\(([^)\s]+)\)")  # [text](target) in Markdown
MANUAL = "engine/src/engine/docs/"  # the engine's manual: a project reads the installed one


def unlink_missing(dest: Path) -> int:
    """Rewrite each relative Markdown link of the copy's `*.md` whose file stayed in the
    template as its text and where it is: a page of the engine's manual as that page, found by
    `make docs` (the copy reads the manual of the engine it installed); the engine's source or
    BENCHMARKS.md as the template's path. So none leads nowhere (a new project's docs had 9
    such links); returns how many."""
    count = 0
    for page in dest.rglob("*.md"):
        if VENDOR in page.relative_to(dest).parts:
            continue

        def plain(match: re.Match[str], page: Path = page) -> str:
            nonlocal count
            text, target = match.groups()
            path = target.split("#")[0]
            if not path or ":" in path or (page.parent / path).exists():
                return match[0]  # a URL, an anchor or a file the copy holds
            count += 1
            where = os.path.normpath(os.path.relpath(page.parent / path, dest))
            if where.startswith(MANUAL):
                shown = target.rpartition("/")[2]  # the page, and its anchor
                if shown == "README.md":
                    return f"{text} (`make docs` prints where)"
                return f"{text} (the engine manual's {shown})"
            return text if where in text else f"{text} (the template's `{where}`)"

        text = page.read_text(encoding="utf-8")
        rewritten = LINK.sub(plain, text)
        if rewritten != text:
            page.write_text(rewritten, encoding="utf-8")
    return count


def copy_template(root: Path, dest: Path, engine: str = "") -> NewProject:
    """Copy the template at `root` into the new folder `dest`, as a project named after it,
    depending on the engine's wheel (or on ENGINE=`engine`, a git URL or a path): into a
    hidden folder beside it first, renamed to `dest` once complete, so an interrupted copy
    never leaves a half project under the name asked for."""
    name = project_name(dest.name)
    dest.parent.mkdir(parents=True, exist_ok=True)
    # mkdir, as `mkdir` makes it, under the umask (mkdtemp's 0700 became the project's mode);
    # its random name is taken by this copy alone, or mkdir fails
    staging = dest.parent / f".{dest.name}.{secrets.token_hex(8)}.partial"
    staging.mkdir()
    try:
        project = _copy(root, staging, name, engine)
        os.rename(staging, dest)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)  # this copy's own folder, nothing else
        raise
    return project


def _copy(root: Path, dest: Path, name: str, engine: str) -> NewProject:
    copied, left_out, suite = 0, {}, template_suite(root)
    for rel in template_files(root):
        stays = _template_only(root, rel, suite)
        if stays is not None:  # a folder is listed once
            left_out[stays[0]] = stays[1]
            continue
        (dest / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(root / rel, dest / rel)
        copied += 1
    template = re.search(r'^name = "([^"]+)"$', (root / "pyproject.toml").read_text(), re.M)
    (dest / VENDOR).mkdir()
    requirement = source_requirement(engine) if engine else build_wheel(root, dest / VENDOR)
    pyproject = dest / "pyproject.toml"
    text = renamed_pyproject(pyproject.read_text(), name).replace(*PIN_COMMENT)
    pyproject.write_text(pinned(text, requirement))
    (dest / "Makefile").write_text(without_targets((dest / "Makefile").read_text()))
    origin = template[1] if template else root.name
    pin = f"`{requirement}`"
    readme = README.format(name=name, template=origin, engine=pin, layout=layout(dest))
    (dest / "README.md").write_text(readme)
    unlink_missing(dest)
    return NewProject(name, copied, sorted(left_out.items()))


def report(project: NewProject, root: Path, dest: Path) -> str:
    """What the user reads after the copy: what was left out and how to get it back."""
    width = max((len(path) for path, _ in project.left_out), default=0) + 2
    lines = [
        f"Copied {project.copied} files to {dest} as project {project.name!r}: fill in the TODOs "
        "of its README.md and pyproject.toml."
    ]
    if project.left_out:
        lines.append("Left out, as only the template needs them:")
        lines += [f"  {path:<{width}}{why}" for path, why in project.left_out]
        targets, extras = ", ".join(MAKE_TARGETS), ", ".join(EXTRAS)
        lines.append(f"  Makefile targets {targets}; pyproject.toml extra {extras}")
        bench, into = shlex.quote(str(root / "bench")), shlex.quote(str(dest))
        lines.append(f"To get one back, copy it from the template: cp -r {bench} {into}/, and")
        lines.append("  the targets and the extra from the template's Makefile and pyproject.toml.")
    lines.append("Docs: docs/ (its own files); the engine's manual, installed with it: make docs")
    lines.append(f"Next: cd {shlex.quote(str(dest))} && git init && make test")
    return "\n".join(lines)


def main(argv: list[str]) -> None:
    """CLI: `python -m tools.new_project DEST [ENGINE]` (ENGINE empty: the wheel)."""
    if len(argv) not in (1, 2) or not argv[0]:
        raise SystemExit("usage: make new-project DEST=../my-project [ENGINE=git+URL@TAG]")
    root, dest = Path(__file__).resolve().parents[1], Path(argv[0]).resolve()
    check_dest(root, dest, argv[0])
    engine = argv[1] if len(argv) == 2 else ""
    if engine:
        source_requirement(engine)  # a bad ENGINE is refused before anything is written
    try:
        project = copy_template(root, dest, engine)
    except OSError as err:  # a parent that is a file, a name too long, no permission, full
        raise SystemExit(
            f"DEST={argv[0]!r}: cannot create {dest} ({err.strerror or err}); choose another "
            "folder."
        ) from None
    print(report(project, root, dest))


if __name__ == "__main__":
    main(sys.argv[1:])
