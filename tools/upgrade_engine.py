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


def source_requirement(engine: str) -> str:
    """The requirement for ENGINE=`engine`: a git URL (the template repo's engine/ unless its
    `#subdirectory=` says otherwise) or a local path (a folder with the engine's
    pyproject.toml, or a wheel)."""
    if engine.startswith("git+"):
        return f"{DISTRIBUTION} @ {engine if '#' in engine else engine + '#subdirectory=engine'}"
    path = Path(engine).expanduser().resolve()
    if path.is_dir() and (path / "engine" / "pyproject.toml").is_file():
        path = path / "engine"  # a checkout of the template: its engine/ folder
    if not (path.is_file() or (path / "pyproject.toml").is_file()):
        raise SystemExit(
            f"ENGINE={engine}: neither a git URL (git+https://...@vX.Y.Z) nor a folder holding "
            "the engine's pyproject.toml or a wheel; give one of those."
        )
    return f"{DISTRIBUTION} @ {path.as_uri()}"


def wheel_version(wheel: Path) -> str:
    """X.Y.Z of an engine wheel, from its file name."""
    found = WHEEL.fullmatch(wheel.name)
    if found is None or not wheel.is_file():
        raise SystemExit(
            f"WHEEL={wheel}: expected an existing engine wheel named "
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


def vendor_wheel(root: Path, wheel: Path) -> str:
    """Put `wheel` in root/vendor/ as the only engine wheel there; its requirement."""
    version = wheel_version(wheel)
    vendor = root / VENDOR
    vendor.mkdir(exist_ok=True)
    if wheel.resolve().parent != vendor.resolve():
        for old in vendor.glob("hydra_torch_data_engine-*.whl"):
            old.unlink()
        shutil.copy2(wheel, vendor / wheel.name)
    return f"{DISTRIBUTION}=={version}"


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
    requirement = vendor_wheel(root, Path(wheel)) if wheel else source_requirement(engine)
    pyproject = root / "pyproject.toml"
    pyproject.write_text(pinned(pyproject.read_text(encoding="utf-8"), requirement))
    if engine:  # the pin is a URL now: a wheel left in vendor/ would only mislead
        for old in (root / VENDOR).glob("hydra_torch_data_engine-*.whl"):
            old.unlink()
    found = ["--find-links", str(root / VENDOR)]
    _pip(*found, "--force-reinstall", "--no-deps", requirement)  # even at the same version
    _pip(*found, "-e", f"{root}[dev]")  # what the new engine needs besides
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
