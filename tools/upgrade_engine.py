"""`make upgrade-engine WHEEL=... | ENGINE=...`: move a project to another engine release.

The project pins the engine in pyproject.toml like any dependency: `hydra-torch-data-engine==
X.Y.Z`, installed from the wheel in vendor/, or `hydra-torch-data-engine @ <url>` for a git tag
or a path. This rewrites that one line (and vendor/), then reinstalls the engine and whatever
new dependencies it brings; src/, conf/ and tests/ stay as they are. Standard library only.
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
from pathlib import Path

DISTRIBUTION = "hydra-torch-data-engine"
PIN = re.compile(rf'^(\s*)"{DISTRIBUTION}\s*(?:==|@)[^"]*",?$', re.M)
WHEEL = re.compile(r"hydra_torch_data_engine-(\d+\.\d+\.\d+[^-]*)-py3-none-any\.whl")
VENDOR = "vendor"  # the folder of the pinned wheel (make new-project puts it there)
STAMP = Path(".venv") / ".installed"  # the Makefile's set-up stamp


UNSAFE = re.compile(r'["\\;\s]')  # would end the TOML string or the requirement early


def source_requirement(engine: str) -> str:
    """The requirement for ENGINE=`engine`: a git URL (the template repo's engine/ unless its
    `#subdirectory=` says otherwise) or a local path (a folder with the engine's
    pyproject.toml, or a wheel)."""
    if UNSAFE.search(engine):
        raise SystemExit(
            f"ENGINE={engine!r}: a URL or path with a quote, backslash, semicolon or space "
            "cannot be pinned in pyproject.toml; give it without them."
        )
    if engine.startswith("git+"):
        if "subdirectory=" not in engine.partition("#")[2]:
            engine += ("&" if "#" in engine else "#") + "subdirectory=engine"
        return f"{DISTRIBUTION} @ {engine}"
    path = Path(engine).expanduser().resolve()
    if path.is_dir() and (path / "engine" / "pyproject.toml").is_file():
        path = path / "engine"  # a checkout of the template: its engine/ folder
    if path.is_file():
        wheel_version(path, "ENGINE")  # a file must be an engine wheel
    elif not (path / "pyproject.toml").is_file():
        raise SystemExit(
            f"ENGINE={engine}: neither a git URL (git+https://...@vX.Y.Z) nor a folder holding "
            "the engine's pyproject.toml or a wheel; give one of those."
        )
    return f"{DISTRIBUTION} @ {path.as_uri()}"


def wheel_version(wheel: Path, key: str = "WHEEL") -> str:
    """X.Y.Z of an engine wheel, from its file name (`key`: the make variable that named it)."""
    found = WHEEL.fullmatch(wheel.name)
    if found is None or not wheel.is_file():
        raise SystemExit(
            f"{key}={wheel}: expected an existing engine wheel named "
            "hydra_torch_data_engine-X.Y.Z-py3-none-any.whl (pip wheel --no-deps engine/)."
        )
    return found[1]


def pinned(pyproject: str, requirement: str) -> str:
    """`pyproject` with its engine dependency line replaced by `requirement`."""
    if len(PIN.findall(pyproject)) != 1:
        raise SystemExit(
            f'pyproject.toml: expected one dependency line "{DISTRIBUTION}==X.Y.Z" (or "... @ '
            'url") among [project] dependencies; put it back, then rerun.'
        )
    return PIN.sub(lambda m: f'{m[1]}"{requirement}",', pyproject, count=1)


def _old_wheels(root: Path, keep: str = "") -> list[Path]:
    return [p for p in (root / VENDOR).glob("hydra_torch_data_engine-*.whl") if p.name != keep]


def _pip(*args: str) -> None:
    subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", *args], check=True)


def installed_version() -> str:
    """The engine version this environment imports now (a fresh interpreter: not this one's)."""
    code = f"from importlib.metadata import version; print(version('{DISTRIBUTION}'))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    return done.stdout.strip() or "none"


def upgrade(root: Path, wheel: str, engine: str) -> str:
    """Pin the engine of the project at `root` to WHEEL or ENGINE and install it; a report."""
    if (root / "engine" / "pyproject.toml").is_file():
        raise SystemExit(
            "make upgrade-engine moves a project made by make new-project; this checkout is "
            "the template, whose engine is its own engine/ folder (installed editable)."
        )
    if bool(wheel) == bool(engine):
        raise SystemExit("make upgrade-engine: give one of WHEEL=path/to/engine.whl or ENGINE=url")
    before = installed_version()
    pyproject = root / "pyproject.toml"
    text = pyproject.read_text(encoding="utf-8")
    if wheel:
        path = Path(wheel).expanduser()
        requirement = f"{DISTRIBUTION}=={wheel_version(path)}"
        (root / VENDOR).mkdir(exist_ok=True)
        placed = root / VENDOR / path.name
        if path.resolve() != placed.resolve():
            shutil.copy2(path, placed)
        install = ["--no-index", "--no-deps", str(placed)]  # this file, never an index's
    else:
        requirement = source_requirement(engine)
        install = ["--no-deps", requirement]
    new_text = pinned(text, requirement)  # one it cannot pin is refused before installing
    try:
        _pip("--force-reinstall", *install)  # even at the same version
    except subprocess.CalledProcessError:
        if wheel and path.resolve() != placed.resolve():
            placed.unlink()  # nothing changed: the old pin and wheel stay
        raise SystemExit(
            f"make upgrade-engine: pip could not install {requirement}; nothing was changed."
        ) from None
    pyproject.write_text(new_text)
    for old in _old_wheels(root, keep=placed.name if wheel else ""):
        old.unlink()  # one engine wheel in vendor/: the pinned one (none for a URL pin)
    _pip("--find-links", str(root / VENDOR), "-e", f"{root}[dev]")  # what it needs besides
    (root / STAMP).touch()
    return (
        f"{DISTRIBUTION} {before} -> {installed_version()} (pyproject.toml: {requirement}); "
        "src/ and conf/ unchanged. What changed: the engine's CHANGELOG.md. Next: make test"
    )


def main(argv: list[str]) -> None:
    """CLI: `python -m tools.upgrade_engine --wheel PATH | --engine URL` (one may be empty)."""
    parser = argparse.ArgumentParser(prog="make upgrade-engine")
    parser.add_argument("--wheel", default="")
    parser.add_argument("--engine", default="")
    args = parser.parse_args(argv)
    print(upgrade(Path.cwd(), args.wheel, args.engine))


if __name__ == "__main__":
    main(sys.argv[1:])
