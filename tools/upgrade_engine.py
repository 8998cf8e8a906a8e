"""`make upgrade-engine WHEEL=... | ENGINE=...`: move a project to another engine release.

The project pins the engine in pyproject.toml like any dependency: `hydra-torch-data-engine==
X.Y.Z`, installed from the wheel in vendor/, or `hydra-torch-data-engine @ <url>` for a git tag
or a path. This rewrites that one line (and vendor/), then reinstalls the engine and whatever
new dependencies it brings; src/, conf/ and tests/ stay as they are. Standard library only.

An upgrade is a transaction: the new wheel is staged in vendor/.upgrade/ beside a copy of the
old pyproject.toml (the journal), checked against its own metadata, installed with the new
pin, and only then moved into vendor/; the journal's removal is the commit. A failure puts
pyproject.toml back and leaves vendor/ as it was; what a killed upgrade leaves is undone (a
journal) or finished (no journal) by the next upgrade or `make setup` (`--setup`). One of them
runs at a time (.venv/.engine.lock): a second is refused, naming the first.
"""

from __future__ import annotations

import argparse
import contextlib
import email.parser
import fcntl
import os
import re
import shutil
import subprocess
import sys
import zipfile
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

DISTRIBUTION = "hydra-torch-data-engine"
NAME = r"(?i:hydra[-_.]+torch[-_.]+data[-_.]+engine)(?![\w.-])"  # any spelling pip reads as it
# a list item naming the engine, in either TOML quote: its indent, the requirement, a comment
PIN = re.compile(rf"""^([ \t]*)(["'])({NAME}(?:(?!\2).)*)\2[ \t]*,?([ \t]*#.*)?$""", re.M)
EXACT = re.compile(rf"{NAME}\s*==\s*([0-9][\w.+!-]*)\s*")  # ==X.Y.Z: the wheel in vendor/
URL = re.compile(rf"{NAME}\s*@\s*[^\s;]+\s*")  # @ url: pip installs it with the project
WHEEL = re.compile(r"hydra_torch_data_engine-(\d+\.\d+\.\d+[^-]*)-py3-none-any\.whl")
VENDOR = "vendor"  # the folder of the pinned wheel (make new-project puts it there)
STAGING = Path(VENDOR) / ".upgrade"  # an upgrade's wheel until it commits (make ignores it)
JOURNAL = "pyproject.toml.before"  # in STAGING: the pin to go back to; present = not committed
STAMP = Path(".venv") / ".installed"  # the Makefile's set-up stamp
LOCK = Path(".venv") / ".engine.lock"  # held by an upgrade or make setup while it runs
METADATA_BYTES = 1 << 20  # a wheel's METADATA is read up to this: the engine's is ~2 KB
CHANGELOG = "engine/CHANGELOG.md"  # in the wheel (package data): what each release changed


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
    if engine.startswith("git+file:") and not engine.startswith("git+file://localhost/"):
        # pip's requirement parser wants a host in the URL: git+file:///repo was pinned, then
        # make setup died in its traceback; git reads file://localhost/repo as the same folder
        path = engine.removeprefix("git+file:")
        if path[:12].lower() == "//localhost/":  # the host as any case spells it
            path = "///" + path[12:]
        if not path.startswith("///"):  # git+file://tmp/x names host tmp, git+file:/x none
            folder, at, tag = path.partition("@")
            if not folder.strip("/"):
                raise SystemExit(
                    f"ENGINE={engine!r} names no folder; give git+file:///path/to/repo@TAG."
                )
            absolute = (
                "/" + folder.lstrip("/") if folder.startswith("/") else os.path.abspath(folder)
            )
            raise SystemExit(
                f"ENGINE={engine!r}: a git file URL names its folder after three slashes; "
                f"give git+file://{absolute}{at}{tag} (git+file:///path/to/repo@TAG)."
            )
        engine = "git+file://localhost/" + path.lstrip("/")
    if engine.startswith("git+"):
        if "subdirectory=" not in engine.partition("#")[2]:
            engine += ("&" if "#" in engine else "#") + "subdirectory=engine"
        return f"{DISTRIBUTION} @ {engine}"
    path = Path(engine).expanduser().resolve()
    if path.is_dir() and (path / "engine" / "pyproject.toml").is_file():
        path = path / "engine"  # a checkout of the template: its engine/ folder
    if path.is_file():
        check_metadata(path, wheel_version(path, "ENGINE"), f"ENGINE={engine}")
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


def check_metadata(wheel: Path, version: str, given: str) -> None:
    """The wheel's own METADATA must name the engine at `version`, the one its file name says
    and the pin will say: a renamed wheel would be pinned as what it is not. Read as hostile
    input (any file can be named like a wheel): bounded, and any fault is one line."""
    fix = "build it again (pip wheel --no-deps engine/) and give that file"
    try:
        with zipfile.ZipFile(wheel) as archive:
            members = [
                info
                for info in archive.infolist()
                if re.fullmatch(r"[^/]+\.dist-info/METADATA", info.filename)
            ]
            if len(members) != 1:
                raise SystemExit(
                    f"{given}: {wheel.name} holds {len(members)} *.dist-info/METADATA files, "
                    f"not one; {fix}."
                )
            with archive.open(members[0]) as stream:
                raw = stream.read(METADATA_BYTES + 1)
    except (zipfile.BadZipFile, zlib.error, EOFError, NotImplementedError, OSError) as err:
        raise SystemExit(f"{given}: {wheel.name} is no readable wheel ({err}); {fix}.") from None
    if len(raw) > METADATA_BYTES:
        raise SystemExit(
            f"{given}: {members[0].filename} is over {METADATA_BYTES} bytes, no engine's; {fix}."
        )
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise SystemExit(f"{given}: {members[0].filename} is not UTF-8 text; {fix}.") from None
    headers = email.parser.HeaderParser().parsestr(text)
    name = re.sub(r"[-_.]+", "-", str(headers.get("Name", ""))).lower()
    said = str(headers.get("Version", ""))
    if name != DISTRIBUTION or said != version:
        raise SystemExit(
            f"{given}: its {members[0].filename} says {name or '(no name)'} "
            f"{said or '(no version)'}, its file name {DISTRIBUTION} {version}; {fix}."
        )


@dataclass(frozen=True)
class Pin:
    """pyproject.toml's engine dependency: the requirement as written, and the version of a
    wheel pin (None: a URL pin, which pip installs with the project)."""

    requirement: str
    version: str | None


def engine_pin(pyproject: str) -> Pin:
    """The one engine line of `pyproject`, read as make setup and an upgrade use it: exactly
    ==X.Y.Z (the wheel in vendor/) or @ url. Anything else is refused in one line: a marker
    read as a URL pin made make setup delete every wheel, the pinned one too. Not parsed
    with `packaging`: make setup runs this in a new .venv, which has pip alone."""
    found = list(PIN.finditer(pyproject))
    if not found:
        raise SystemExit(
            f'pyproject.toml: expected one dependency line "{DISTRIBUTION}==X.Y.Z" (or "... @ '
            'url") among [project] dependencies; put it back, then rerun.'
        )
    if len(found) > 1:
        lines = ", ".join(f'"{m[3]}"' for m in found)
        raise SystemExit(
            f"pyproject.toml: {len(found)} engine dependency lines ({lines}), and make setup "
            "installs one; keep one, then rerun."
        )
    requirement = found[0][3]
    exact = EXACT.fullmatch(requirement)
    if exact is None and URL.fullmatch(requirement) is None:
        why = (
            "an environment marker (the project imports the engine wherever it runs)"
            if ";" in requirement
            else "extras or a version range"
        )
        raise SystemExit(
            f'pyproject.toml: the engine pin "{requirement}" has {why}, and make setup and make '
            f'upgrade-engine read "{DISTRIBUTION}==X.Y.Z" or "{DISTRIBUTION} @ url" alone; '
            "write it as one of those, then rerun."
        )
    return Pin(requirement, exact[1] if exact else None)


def pinned(pyproject: str, requirement: str) -> str:
    """`pyproject` with its engine dependency line replaced by `requirement` (its comment kept)."""
    engine_pin(pyproject)  # one line of a form this rewrites, or refused
    return PIN.sub(lambda m: f'{m[1]}"{requirement}",{m[4] or ""}', pyproject, count=1)


def _wheels(folder: Path) -> dict[str, Path]:
    """The engine wheels in `folder`, by version."""
    found = (WHEEL.fullmatch(p.name) for p in folder.glob("hydra_torch_data_engine-*.whl"))
    return {m[1]: folder / m[0] for m in found if m is not None}


def _write(path: Path, text: str) -> None:
    """Replace `path` by `text` at once: a kill leaves the old file or the new, never half."""
    partial = path.with_name(f".{path.name}.partial")
    partial.write_text(text, encoding="utf-8")
    os.replace(partial, path)


def _no_wheel(version: str) -> str:
    return (
        f"pyproject.toml pins {DISTRIBUTION}=={version}, whose wheel is not in vendor/: put "
        f"hydra_torch_data_engine-{version}-py3-none-any.whl there, or run make upgrade-engine "
        "WHEEL=path/to/it."
    )


@contextlib.contextmanager
def engine_lock(root: Path, doing: str) -> Iterator[None]:
    """Hold the project's LOCK while `doing` (make setup, make upgrade-engine) changes its pin,
    vendor/ or .venv: make setup run beside a live upgrade took it for a killed one and undid
    it, and the upgrade died in a traceback. flock, so the kernel lets go when the holder
    dies (kill -9 too) and the next run recovers what it left. Not engine.core.folder_lock:
    make setup runs this before the engine is installed (a new .venv), and the tools serve
    every engine release, whatever its modules."""
    path = root / LOCK
    if path.parent.exists() and not path.parent.is_dir():  # a raw FileExistsError
        raise SystemExit(
            f"{doing}: .venv is a file, not the project's virtualenv: move it away, then rerun."
        )
    if path.is_symlink() or path.is_dir():  # a link's target would be written over
        raise SystemExit(
            f"{doing}: {LOCK} is {'a link' if path.is_symlink() else 'a folder'}, where {doing} "
            "keeps its lock file: remove it, then rerun."
        )
    path.parent.mkdir(exist_ok=True)
    with path.open("a+", encoding="utf-8") as file:  # not inherited by pip (PEP 446)
        try:
            fcntl.flock(file, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            file.seek(0)
            holder = file.readline().strip() or "another make setup or make upgrade-engine"
            raise SystemExit(
                f"{doing}: {holder} is changing this project's engine ({LOCK} is locked); let "
                f"it end, or stop it (a stopped upgrade is undone), then rerun {doing}."
            ) from None
        file.truncate(0)
        started = datetime.now().isoformat(timespec="seconds")
        file.write(f"{doing} (pid {os.getpid()}, started {started})\n")
        file.flush()
        yield


def recover(root: Path) -> str:
    """Undo (its journal is there) or finish (it committed) an upgrade that was killed; then
    vendor/ holds the one wheel pyproject.toml pins, so pip never sees two engines. A line
    saying what was done, or "" when nothing was left over."""
    staging, vendor = root / STAGING, root / VENDOR
    if staging.is_symlink() or (staging.exists() and not staging.is_dir()):
        raise SystemExit(
            f"{STAGING} is a {'link' if staging.is_symlink() else 'file'}, where make "
            "upgrade-engine stages a wheel in a folder of its own: move it out of vendor/, "
            "then rerun."
        )
    journal = staging / JOURNAL
    if journal.is_symlink() or (journal.exists() and not journal.is_file()):
        raise SystemExit(
            f"{STAGING}/{JOURNAL} is no file of make upgrade-engine's own (a link or a folder), "
            "so pyproject.toml is not restored from it: check pyproject.toml's engine pin, "
            f"remove {STAGING}, then rerun."
        )
    undone = journal.is_file()
    if undone:
        _write(root / "pyproject.toml", journal.read_text(encoding="utf-8"))
        (root / STAMP).unlink(missing_ok=True)  # .venv may hold the new engine: make setup
    wheels = _wheels(vendor) if vendor.is_dir() else {}
    if not staging.exists() and len(wheels) < 2:
        return ""
    try:
        pin = engine_pin((root / "pyproject.toml").read_text(encoding="utf-8"))
    except SystemExit as err:  # before any wheel is removed: the pin says which one stays
        names = ", ".join(sorted(p.name for p in wheels.values()))
        raise SystemExit(
            f"vendor/ holds {len(wheels)} engine wheels ({names}), left by an interrupted make "
            f"upgrade-engine, and the pin says which stays: {err.code}"
        ) from None
    version = pin.version  # None: a URL pin, no wheel
    if version is not None and version not in wheels:
        staged = _wheels(staging).get(version) if staging.is_dir() else None
        if staged is None:
            raise SystemExit(_no_wheel(version))
        wheels[version] = Path(shutil.move(staged, vendor / staged.name))
    removed = sorted(p.name for v, p in wheels.items() if v != version)
    for name in removed:
        (vendor / name).unlink()
    if staging.exists():
        shutil.rmtree(staging)
    kept = f"vendor/{wheels[version].name}" if version else "no wheel (a URL pin)"
    return (
        f"An interrupted make upgrade-engine was {'undone' if undone else 'finished'}: "
        f'pyproject.toml pins "{pin.requirement}", vendor/ holds {kept}'
        + (f" (removed {', '.join(removed)})." if removed else ".")
    )


def _pip(*args: str) -> None:
    subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", *args], check=True)


def installed() -> tuple[str, str]:
    """The engine version this environment imports now and where its CHANGELOG.md is installed
    (a fresh interpreter: not this one's); "none" and "" when it is not installed."""
    code = (
        "from importlib.metadata import PackageNotFoundError, distribution\n"
        "try:\n"
        f"    d = distribution('{DISTRIBUTION}')\n"
        "except PackageNotFoundError:\n"
        "    raise SystemExit(0)\n"
        f"logs = [f for f in d.files or () if f.as_posix() == '{CHANGELOG}']\n"
        "print(d.version, d.locate_file(logs[0]) if logs else '', sep='\\n')\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    version, _, changelog = done.stdout.strip().partition("\n")
    return version or "none", changelog


def setup(root: Path) -> None:
    """What `make setup` runs first in a project: recover what a killed upgrade left, then
    install the wheel the pin names from vendor/, that file alone (--no-index: no package
    index's copy of the version can stand in for it). Refused while an upgrade runs."""
    with engine_lock(root, "make setup"):
        _setup(root)


def _setup(root: Path) -> None:
    said = recover(root)
    if said:
        print(said)
    version = engine_pin((root / "pyproject.toml").read_text(encoding="utf-8")).version
    if version is None:
        return  # a URL pin: pip installs it with the project
    wheel = _wheels(root / VENDOR).get(version)
    if wheel is None:
        raise SystemExit(_no_wheel(version))  # not pip's "no matching distribution"
    _pip("--no-index", "--no-deps", str(wheel))


def upgrade(root: Path, wheel: str, engine: str) -> str:
    """Pin the engine of the project at `root` to WHEEL or ENGINE and install it; a report."""
    if (root / "engine" / "pyproject.toml").is_file():
        raise SystemExit(
            "make upgrade-engine moves a project made by make new-project; this checkout is "
            "the template, whose engine is its own engine/ folder (installed editable)."
        )
    if bool(wheel) == bool(engine):
        raise SystemExit("make upgrade-engine: give one of WHEEL=path/to/engine.whl or ENGINE=url")
    with engine_lock(root, "make upgrade-engine"):
        return _upgrade(root, wheel, engine)


def _upgrade(root: Path, wheel: str, engine: str) -> str:
    recovered = recover(root)
    before = installed()[0]
    pyproject = root / "pyproject.toml"
    text = pyproject.read_text(encoding="utf-8")
    given = Path(wheel).expanduser() if wheel else None
    if given is not None:
        requirement = f"{DISTRIBUTION}=={wheel_version(given)}"
    else:
        requirement = source_requirement(engine)
    new_text = pinned(text, requirement)  # one it cannot pin is refused before anything is written
    staging = root / STAGING
    staging.mkdir(parents=True)
    _write(staging / JOURNAL, text)  # whole or absent: recover() restores pyproject.toml from it
    written = False
    try:
        if given is not None:
            staged = Path(shutil.copyfile(given, staging / given.name))
            check_metadata(staged, wheel_version(given), f"WHEEL={wheel}")  # the file installed
            install = ["--no-index", "--no-deps", str(staged)]  # this file, never an index's
        else:
            install = ["--no-deps", requirement]
        _write(pyproject, new_text)
        written = True
        # the project with the new pin: the engine and what it needs besides, resolved with
        # the project's own pins before any of it is installed; then this very file
        _pip("--find-links", str(staging), "--find-links", str(root / VENDOR), "-e", f"{root}[dev]")
        _pip("--force-reinstall", *install)  # even at the same version
    except BaseException as err:
        if written:
            _write(pyproject, text)
        shutil.rmtree(staging)
        if not isinstance(err, subprocess.CalledProcessError):
            raise
        (root / STAMP).unlink(missing_ok=True)  # pip may have begun: make setup checks .venv
        raise SystemExit(
            f"make upgrade-engine: pip could not install {requirement} with this project's "
            "dependencies (its error is above); pyproject.toml and vendor/ are as they were."
        ) from None
    if given is not None:
        os.replace(staged, root / VENDOR / given.name)
    (staging / JOURNAL).unlink()  # the commit: from here on, a kill is finished, not undone
    recover(root)  # finishes it as it would a killed one: vendor/ keeps the pinned wheel alone
    (root / STAMP).touch()
    after, changelog = installed()
    if not changelog:
        changelog = f"none in {requirement}"
    elif Path(changelog).is_relative_to(root):
        changelog = Path(changelog).relative_to(root).as_posix()
    return (recovered + "\n" if recovered else "") + (
        f"{DISTRIBUTION} {before} -> {after} (pyproject.toml: {requirement}); src/ and conf/ "
        f"unchanged. What changed: {changelog} (the engine's CHANGELOG). Next: make test"
    )


def main(argv: list[str]) -> None:
    """CLI: `python -m tools.upgrade_engine --wheel PATH | --engine URL` (one may be empty), or
    `--setup` (the Makefile's set-up of a project's engine)."""
    parser = argparse.ArgumentParser(prog="make upgrade-engine")
    parser.add_argument("--wheel", default="")
    parser.add_argument("--engine", default="")
    parser.add_argument("--setup", action="store_true")
    args = parser.parse_args(argv)
    if args.setup:
        setup(Path.cwd())
    else:
        print(upgrade(Path.cwd(), args.wheel, args.engine))


if __name__ == "__main__":
    main(sys.argv[1:])
