"""The blocks of BENCHMARKS.md that the benchmarks write (each replaced on every run), between
marker comments; no dependency beyond the standard library (bench/gpu_check.py runs on machines
with torch alone)."""

from __future__ import annotations

from pathlib import Path

START, END = "<!-- make bench: start -->", "<!-- make bench: end -->"
GROWTH = "make bench-growth"  # the growth section's block (bench/growth.py)
GPU = "make gpu-check"  # bench/gpu_check.py's block


def markers(name: str) -> tuple[str, str]:
    """The comments that delimit the block `name` in BENCHMARKS.md."""
    return f"<!-- {name}: start -->", f"<!-- {name}: end -->"


def write_block(path: Path, text: str, name: str = "make bench") -> None:
    """Put `text` between the markers of block `name` in `path` (re-read now: others may have
    edited it); without them, insert the block before the first section after the `make bench`
    block (after the text that reads that block), else before the first section."""
    content = path.read_text() if path.exists() else "# Benchmarks\n"
    start, end = markers(name)
    block = f"{start}\n{text.strip()}\n{end}"
    if start in content and end in content:
        before, rest = content.split(start, 1)
        content = before + block + rest.split(end, 1)[1]
    elif END in content:  # after the `make bench` block and the text that reads it
        head, tail = content.split(END, 1)
        starts = [i for i in (tail.find("\n## "), tail.find("\n<!-- ")) if i >= 0]
        at = min(starts, default=-1)  # the next section or block
        if at < 0:
            content = f"{content.rstrip()}\n\n{block}\n"
        else:
            content = f"{head}{END}{tail[:at].rstrip()}\n\n{block}\n{tail[at:]}"
    elif "\n## " in content:
        head, tail = content.split("\n## ", 1)
        content = f"{head}\n{block}\n\n## {tail}"
    else:
        content = f"{content.rstrip()}\n\n{block}\n"
    path.write_text(content)


def publish(text: str, name: str, write: bool, path: Path = Path("BENCHMARKS.md")) -> None:
    """Print a section's `text`, and (`write`) put it into block `name` of `path`."""
    print(text)
    if write:
        write_block(path, text, name)
        print(f"written into {path.name}")
