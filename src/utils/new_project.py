"""`make new-project DEST=../my-project`: copy the template into a fresh folder.

Copies what git tracks or would track (so no outputs, data, virtualenv, caches or .git) and
nothing else; the new tree passes its own `make test`.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path


def template_files(root: Path) -> list[Path]:
    """Files of the checkout at `root` that git tracks or would track, as relative paths."""
    listing = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=root,
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    return [Path(p) for p in sorted(set(listing.split("\0"))) if p and (root / p).is_file()]


def copy_template(root: Path, dest: Path) -> int:
    """Copy the template at `root` into the new folder `dest`; returns the number of files."""
    if dest.exists():
        raise SystemExit(f"{dest} already exists; choose a new folder for DEST.")
    files = template_files(root)
    for rel in files:
        (dest / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(root / rel, dest / rel)
    return len(files)


def main(argv: list[str]) -> None:
    """CLI: `python -m src.utils.new_project DEST`."""
    if len(argv) != 1 or not argv[0]:
        raise SystemExit("usage: make new-project DEST=../my-project")
    dest = Path(argv[0]).resolve()
    count = copy_template(Path(__file__).resolve().parents[2], dest)
    print(f"Copied {count} files to {dest}. Next: cd {dest} && git init && make test")


if __name__ == "__main__":
    main(sys.argv[1:])
