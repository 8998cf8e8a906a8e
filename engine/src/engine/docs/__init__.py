"""The engine's manual, installed with the engine as package data: a project holds no engine/
folder, so the pages of the engine it runs come with its wheel and are upgraded with it.
`python -m engine.docs` (a project's `make docs`) says where they are."""

from __future__ import annotations

from pathlib import Path

from engine import __version__

MANUAL = Path(__file__).resolve().parent


def where() -> str:
    """Where the installed manual is and which engine version it describes."""
    return (
        f"The engine's manual (hydra-torch-data-engine {__version__}, installed with it and "
        f"upgraded by make upgrade-engine): {MANUAL / 'README.md'}"
    )
